package engine

import (
	"time"

	"github.com/carmyhq/carmy/store"
)

// Observer is told what the runtime does, for metrics. The runtime calls
// it from many goroutines at once, on the path of calls: its methods must
// be safe for concurrent use, quick, and must not block.
type Observer interface {
	// ToolFinished is called once per execution, when its tool returned
	// (or was abandoned at its timeout or cancellation), with the status
	// recorded for it and how long it ran.
	ToolFinished(tool string, status store.Status, took time.Duration)
	// StoreWrite is called after each store write of a call: op
	// StoreReserve with the outcome "reserved", "replay", "conflict",
	// "uncertain" or "error"; op StoreComplete with "ok" or "error".
	StoreWrite(op, outcome string, took time.Duration)
}

// RefusalObserver is implemented by Observers that also count the calls
// the runtime refused before reserving anything, by reason: the Limit of
// the *BusyError (LimitMaxRunning, LimitMaxRunningPerPrincipal,
// LimitAdminReserve). Refused is called on the path of calls, as the
// Observer's methods are.
type RefusalObserver interface {
	Refused(reason string)
}

// The store writes of a call, as StoreWrite names them.
const (
	StoreReserve  = "reserve"
	StoreComplete = "complete"
)

// observers tells several Observers, in order.
type observers []Observer

func (all observers) ToolFinished(tool string, status store.Status, took time.Duration) {
	for _, o := range all {
		o.ToolFinished(tool, status, took)
	}
}

func (all observers) Refused(reason string) {
	for _, o := range all {
		if ro, ok := o.(RefusalObserver); ok {
			ro.Refused(reason)
		}
	}
}

func (all observers) Probed(tool, outcome string) {
	for _, o := range all {
		if po, ok := o.(ProbeObserver); ok {
			po.Probed(tool, outcome)
		}
	}
}

func (all observers) ApprovalNotified(result string) {
	for _, o := range all {
		if no, ok := o.(NotifyObserver); ok {
			no.ApprovalNotified(result)
		}
	}
}

func (all observers) StoreWrite(op, outcome string, took time.Duration) {
	for _, o := range all {
		o.StoreWrite(op, outcome, took)
	}
}

// noObserver observes nothing: the default.
type noObserver struct{}

func (noObserver) ToolFinished(string, store.Status, time.Duration) {}
func (noObserver) StoreWrite(string, string, time.Duration)         {}

// reserveOutcome names a Reserve outcome for StoreWrite.
func reserveOutcome(o store.Outcome, err error) string {
	if err != nil {
		return "error"
	}
	switch o {
	case store.Reserved:
		return "reserved"
	case store.Replay:
		return "replay"
	case store.Conflict:
		return "conflict"
	case store.Uncertain:
		return "uncertain"
	case store.Awaiting:
		return "awaiting"
	}
	return "error"
}
