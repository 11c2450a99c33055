package engine

import (
	"context"
	"sync"
	"time"

	"github.com/carmyhq/carmy/store"
)

// runningSet is the table of executions running on this node: execution id
// to the context the tool runs under. Cancelling an entry cancels the tool.
// It is safe for concurrent use.
//
// An execution is registered before its reservation is proposed, so a
// cancel that commits between the reservation and the tool's start still
// reaches the tool: it starts with its context already cancelled.
type runningSet struct {
	mu     sync.Mutex
	runs   map[string]*run
	closed bool // set by close: nothing more is registered
	busy   inflight
}

// run is one running execution. ctx is cancelled by the cancel
// endpoint or shutdown (with the cause), never by a caller going away.
type run struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// errCancelled and errShutdown are the causes a run's context is cancelled
// with.
var (
	errCancelled = store.NewError(CodeCancelled, "cancelled by request")
	errShutdown  = store.NewError(CodeCancelled, "cancelled: the node is shutting down")
)

func newRunningSet() *runningSet { return &runningSet{runs: make(map[string]*run)} }

// startWithin registers an execution, under a context detached from any
// caller, unless limit (> 0) executions are registered already or the set
// is closed: then it returns false and registers nothing.
func (s *runningSet) startWithin(id string, limit int) (*run, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || limit > 0 && len(s.runs) >= limit {
		return nil, false
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	rn := &run{ctx: ctx, cancel: cancel}
	s.runs[id] = rn
	// Counted under the lock, so that a wait that follows close sees
	// every execution registered before it.
	s.busy.add()
	return rn, true
}

// close makes every later startWithin fail. Shutdown closes the set before
// it waits, so a call that passed the runtime's gate just before shutdown
// began cannot register a tool after the drain has counted none.
func (s *runningSet) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// withTimeout returns the context a tool runs under: the run's, bounded by
// timeout from now.
func (rn *run) withTimeout(timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(rn.ctx, timeout)
}

// finish forgets an execution whose outcome is settled (or which never
// started).
func (s *runningSet) finish(id string) {
	s.mu.Lock()
	rn, ok := s.runs[id]
	delete(s.runs, id)
	s.mu.Unlock()
	if ok {
		rn.cancel(context.Canceled)
		s.busy.done()
	}
}

// cancel cancels the tool of a running execution; false when it does not
// run here.
func (s *runningSet) cancel(id string, cause error) bool {
	s.mu.Lock()
	rn, ok := s.runs[id]
	s.mu.Unlock()
	if ok {
		rn.cancel(cause)
	}
	return ok
}

// has reports whether the execution runs here.
func (s *runningSet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.runs[id]
	return ok
}

// cancelAll cancels every running tool.
func (s *runningSet) cancelAll(cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rn := range s.runs {
		rn.cancel(cause)
	}
}

// len returns the number of running executions.
func (s *runningSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.runs)
}

// wait waits until no execution runs or ctx is done.
func (s *runningSet) wait(ctx context.Context) error { return s.busy.wait(ctx) }

// inflight counts work in progress and lets a caller wait for none. Unlike
// sync.WaitGroup, add may race with wait.
type inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil when nobody waits
}

func (f *inflight) add() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

// wait returns nil once nothing is in flight, or ctx's error.
func (f *inflight) wait(ctx context.Context) error {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return nil
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
