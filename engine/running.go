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
	// perPrincipal counts the registered executions of each principal
	// that is bound by a share (absent: none); tenants is their sum.
	// Executions of admins are in runs only.
	perPrincipal map[string]int
	tenants      int
	// bytes is what the registered executions hold in flight: each one's
	// arguments from its start, and its result from the tool's return,
	// until its outcome is settled (see start and hold).
	bytes int64
	// waits counts the executions with a store write pending (see
	// run.waiting).
	waits int
}

// run is one running execution. ctx is cancelled by the cancel
// endpoint or shutdown (with the cause), never by a caller going away.
type run struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	// tenant: the run counts against principal's share.
	tenant    bool
	principal string
	// bytes: what the execution adds to runningSet.bytes.
	bytes int64
	// waiting is when its current store write began (the reservation,
	// from start; the outcome, from hold); zero while none is pending.
	waiting time.Time
}

// errCancelled and errShutdown are the causes a run's context is cancelled
// with.
var (
	errCancelled = store.NewError(CodeCancelled, "cancelled by request")
	errShutdown  = store.NewError(CodeCancelled, "cancelled: the node is shutting down")
)

func newRunningSet() *runningSet {
	return &runningSet{runs: make(map[string]*run), perPrincipal: make(map[string]int)}
}

// runLimits bounds the running set: total executions at once (0: no
// bound), and, when share > 0, each non-admin principal's executions
// (share) and all non-admin principals' together (total − the admin
// reserve, see adminReserve); and, when bytes > 0, the bytes the
// executions hold in flight (Config.MaxInflightBytes).
type runLimits struct {
	total, share int
	bytes        int64
	// slow, when positive, refuses new calls (as over bytes) while a
	// reservation or a result has waited longer than slow for the store:
	// the node records calls slower than it takes them, and more would
	// only lengthen the queue every write waits in.
	slow time.Duration
}

// adminReserve returns how many of total slots only admins may take when
// tenants are bound by share: total/8, at least 1, and none when shares
// are off or total < 2 (a single slot cannot be split).
func adminReserve(total, share int) int {
	if share <= 0 || total < 2 {
		return 0
	}
	return max(1, total/8)
}

// refusal says why start registered nothing.
type refusal int

const (
	refusedNone         refusal = iota
	refusedClosed               // the set is closed (shutdown)
	refusedTotal                // limits.max_running
	refusedShare                // the principal's limits.max_running_per_principal
	refusedAdminReserve         // the slots left are the admin's
	refusedBytes                // limits.max_inflight_bytes
	refusedSlow                 // a result waits too long for the store
)

// start registers an execution of caller holding size bytes (its
// arguments), under a context detached from any caller, unless a bound of
// lim refuses it: then it registers nothing and says which bound. An
// admin's execution counts against lim.total only; a tenant's (any other
// caller) also against its share and the tenants' total, when
// lim.share > 0. Every execution counts against lim.bytes: one that would
// take the bytes in flight past it is refused, unless nothing is in flight
// (so a single call larger than the bound is not refused for good).
func (s *runningSet) start(id string, caller Caller, size int64, lim runLimits) (*run, refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tenant := lim.share > 0 && !caller.Admin
	switch {
	case s.closed:
		return nil, refusedClosed
	case lim.total > 0 && len(s.runs) >= lim.total:
		return nil, refusedTotal
	case tenant && s.perPrincipal[caller.Principal] >= lim.share:
		return nil, refusedShare
	case tenant && lim.total > 0 && s.tenants >= lim.total-adminReserve(lim.total, lim.share):
		return nil, refusedAdminReserve
	case lim.bytes > 0 && s.bytes > 0 && s.bytes+size > lim.bytes:
		return nil, refusedBytes
	case lim.slow > 0 && s.slowest(time.Now()) > lim.slow:
		return nil, refusedSlow
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	rn := &run{ctx: ctx, cancel: cancel, bytes: size, waiting: time.Now()}
	s.bytes += size
	s.waits++
	if tenant {
		rn.tenant, rn.principal = true, caller.Principal
		s.perPrincipal[caller.Principal]++
		s.tenants++
	}
	s.runs[id] = rn
	// Counted under the lock, so that a wait that follows close sees
	// every execution registered before it.
	s.busy.add()
	return rn, refusedNone
}

// close makes every later start fail. Shutdown closes the set before
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

// hold adds size bytes (its result, on its way to the store) to what the
// execution id holds in flight, until finish. It is never refused: an
// execution whose tool has run records its outcome whatever the load, and
// what it adds is bounded by the executions admitted and the result's
// bound (Config.MaxResultBytes).
func (s *runningSet) hold(id string, size int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rn, ok := s.runs[id]; ok {
		rn.bytes += size
		s.bytes += size
		if rn.waiting.IsZero() {
			rn.waiting = time.Now()
			s.waits++
		}
	}
}

// slowest is how long the oldest pending store write of an execution has
// waited (0: none waits). s.mu is held.
func (s *runningSet) slowest(now time.Time) time.Duration {
	if s.waits == 0 {
		return 0
	}
	var oldest time.Duration
	for _, rn := range s.runs {
		if !rn.waiting.IsZero() {
			oldest = max(oldest, now.Sub(rn.waiting))
		}
	}
	return oldest
}

// wouldRefuse says whether start would refuse, for lim's bounds on bytes
// and slow writes, an execution holding size bytes now; it registers
// nothing.
func (s *runningSet) wouldRefuse(size int64, lim runLimits) refusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case lim.bytes > 0 && s.bytes > 0 && s.bytes+size > lim.bytes:
		return refusedBytes
	case lim.slow > 0 && s.slowest(time.Now()) > lim.slow:
		return refusedSlow
	}
	return refusedNone
}

// answered notes that the caller of execution id no longer waits for its
// pending store write: the reservation has its answer, or the caller was
// told the outcome is not recorded yet (the write goes on in the
// background, no longer a measure of the queue callers wait in).
func (s *runningSet) answered(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rn, ok := s.runs[id]; ok && !rn.waiting.IsZero() {
		rn.waiting = time.Time{}
		s.waits--
	}
}

// inflightBytes is what the registered executions hold in flight.
func (s *runningSet) inflightBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// finish forgets an execution whose outcome is settled (or which never
// started).
func (s *runningSet) finish(id string) {
	s.mu.Lock()
	rn, ok := s.runs[id]
	delete(s.runs, id)
	if ok {
		s.bytes -= rn.bytes
		if !rn.waiting.IsZero() {
			s.waits--
		}
	}
	if ok && rn.tenant {
		s.tenants--
		if s.perPrincipal[rn.principal]--; s.perPrincipal[rn.principal] <= 0 {
			delete(s.perPrincipal, rn.principal)
		}
	}
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
