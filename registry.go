package carmy

import (
	"context"
	"sync"
	"time"

	"github.com/carmyhq/carmy/store"
)

// registry tracks the executions running on this node: execution id to the
// context the tool runs under. Cancelling an entry cancels the tool.
//
// An execution is registered before its reservation is proposed, so a
// cancel that commits between the reservation and the tool's start still
// reaches the tool: it starts with its context already cancelled.
type registry struct {
	mu   sync.Mutex
	runs map[string]*run
	busy inflight
}

// run is one registered execution. ctx is cancelled by the cancel
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

func newRegistry() *registry { return &registry{runs: make(map[string]*run)} }

// start registers an execution. The context is detached from any caller.
func (g *registry) start(id string) *run {
	rn, _ := g.startWithin(id, 0)
	return rn
}

// startWithin registers an execution unless limit (> 0) executions are
// registered already: then it returns false and registers nothing.
func (g *registry) startWithin(id string, limit int) (*run, bool) {
	g.mu.Lock()
	if limit > 0 && len(g.runs) >= limit {
		g.mu.Unlock()
		return nil, false
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	rn := &run{ctx: ctx, cancel: cancel}
	g.runs[id] = rn
	g.mu.Unlock()
	g.busy.add()
	return rn, true
}

// withTimeout returns the context a tool runs under: the run's, bounded by
// timeout from now.
func (rn *run) withTimeout(timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(rn.ctx, timeout)
}

// finish forgets an execution whose outcome is settled (or which never
// started).
func (g *registry) finish(id string) {
	g.mu.Lock()
	rn, ok := g.runs[id]
	delete(g.runs, id)
	g.mu.Unlock()
	if ok {
		rn.cancel(context.Canceled)
		g.busy.done()
	}
}

// cancel cancels the tool of a running execution; false when it does not
// run here.
func (g *registry) cancel(id string, cause error) bool {
	g.mu.Lock()
	rn, ok := g.runs[id]
	g.mu.Unlock()
	if ok {
		rn.cancel(cause)
	}
	return ok
}

// has reports whether the execution runs here.
func (g *registry) has(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.runs[id]
	return ok
}

// cancelAll cancels every running tool.
func (g *registry) cancelAll(cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, rn := range g.runs {
		rn.cancel(cause)
	}
}

// len returns the number of running executions.
func (g *registry) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.runs)
}

// wait waits until no execution runs or ctx is done.
func (g *registry) wait(ctx context.Context) error { return g.busy.wait(ctx) }

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
