package store

import "context"

// What a runtime asks of its backend beside the store (engine.Backend),
// as one process answers it: the memory store is never shared, so it is
// always ready, knows no other runner and has no cancel to deliver (the
// runtime cancels its own executions itself).

// Ready reports that the store can serve: always.
func (m *Memory) Ready(context.Context) error { return nil }

// RunnerGone reports whether another node's runner is known to be gone:
// never, as a memory store knows no other node.
func (m *Memory) RunnerGone(string) bool { return false }

// OnCancel installs nothing: every cancel of a memory store's execution
// is asked of the runtime that runs it, which cancels it itself.
func (m *Memory) OnCancel(func(executionID string)) {}
