package carmy

import (
	"context"
	"sync"
	"time"
)

// registry tracks the executions running on this node: execution id to the
// context the tool runs under. Cancelling an entry cancels the tool.
type registry struct {
	mu   sync.Mutex
	runs map[string]*run
	wg   sync.WaitGroup
}

type run struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// errCancelled and errShutdown are the causes a run's context is cancelled
// with.
var (
	errCancelled = &codedError{CodeCancelled, "cancelled by request"}
	errShutdown  = &codedError{CodeCancelled, "cancelled: the node is shutting down"}
)

func newRegistry() *registry { return &registry{runs: make(map[string]*run)} }

// start registers an execution whose tool may run for at most timeout. The
// context is detached from any caller.
func (g *registry) start(id string, timeout time.Duration) *run {
	base, cancel := context.WithCancelCause(context.Background())
	ctx, stop := context.WithTimeout(base, timeout)
	rn := &run{ctx: ctx, cancel: func(cause error) { cancel(cause); stop() }}
	g.mu.Lock()
	g.runs[id] = rn
	g.mu.Unlock()
	g.wg.Add(1)
	return rn
}

// finish forgets an execution whose outcome is settled.
func (g *registry) finish(id string) {
	g.mu.Lock()
	rn, ok := g.runs[id]
	delete(g.runs, id)
	g.mu.Unlock()
	if ok {
		rn.cancel(context.Canceled)
		g.wg.Done()
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

// wait waits until every execution finished or ctx is done.
func (g *registry) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
