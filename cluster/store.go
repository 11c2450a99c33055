package cluster

import (
	"context"
	"time"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// Store is the Raft-backed store.Store of a node. Writes are commands
// through Node.Apply; their outcomes come from the log. Reads come from
// this node's applied state after a ReadBarrier, except that a finished
// record, being immutable, is answered from local state at once.
type Store struct{ n *Node }

// Store is an engine.Backend: the root package checks it at compile time
// (this package does not import the engine).
var (
	_ store.Store              = (*Store)(nil)
	_ store.Expirer            = (*Store)(nil)
	_ store.Peeker             = (*Store)(nil)
	_ store.RunningNodeLister  = (*Store)(nil)
	_ store.InterruptedCounter = (*Store)(nil)
)

// Store returns the node's store.
func (n *Node) Store() *Store { return &Store{n: n} }

// Node returns the store's node.
func (s *Store) Node() *Node { return s.n }

// apply commits c and turns its Response into a record or an error.
func (s *Store) apply(ctx context.Context, c fsm.Command) (fsm.Response, error) {
	resp, err := s.n.Apply(ctx, c)
	if err != nil {
		return fsm.Response{}, err
	}
	return resp, resp.Err()
}

// PeekFinished implements store.Peeker from this node's applied state.
func (s *Store) PeekFinished(key store.Key) (store.Record, bool) {
	if key.Derived() {
		// A dedupe window may have replaced it on the leader already.
		return store.Record{}, false
	}
	rec, err := s.n.fsm.Lookup(key)
	return rec, err == nil && rec.Status.Finished()
}

// Reserve implements store.Store: one command through the log, which the
// state machine decides. The runtime answers a retry of a finished record
// from PeekFinished before it gets here; Reserve does not check again.
func (s *Store) Reserve(ctx context.Context, key store.Key, fingerprint string, exec store.Execution) (store.Reservation, error) {
	resp, err := s.apply(ctx, fsm.Reserve(key, fingerprint, exec))
	if err != nil {
		return store.Reservation{}, err
	}
	return store.Reservation{Outcome: resp.Outcome, Record: resp.Record}, nil
}

// Complete implements store.Store.
func (s *Store) Complete(ctx context.Context, key store.Key, fingerprint string, res store.Result) (store.Record, error) {
	if err := res.Validate(); err != nil {
		return store.Record{}, err
	}
	resp, err := s.apply(ctx, fsm.Complete(key, fingerprint, res))
	return resp.Record, err
}

// read answers from local state: at once when get finds a finished
// record (not of a derived identity, which a dedupe window may have
// replaced), else after a ReadBarrier.
func (s *Store) read(ctx context.Context, get func() (store.Record, error)) (store.Record, error) {
	if rec, err := get(); err == nil && rec.Status.Finished() && !rec.Key.Derived() {
		return rec, nil
	}
	if err := s.n.ReadBarrier(ctx); err != nil {
		return store.Record{}, err
	}
	return get()
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, executionID string) (store.Record, error) {
	return s.read(ctx, func() (store.Record, error) { return s.n.fsm.Get(executionID) })
}

// Lookup implements store.Store.
func (s *Store) Lookup(ctx context.Context, key store.Key) (store.Record, error) {
	return s.read(ctx, func() (store.Record, error) { return s.n.fsm.Lookup(key) })
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, q store.ListQuery) (store.Page, error) {
	if err := s.n.ReadBarrier(ctx); err != nil {
		return store.Page{}, err
	}
	return s.n.fsm.List(q), nil
}

// RunningNodes implements store.RunningNodeLister from this node's
// applied state, without a read barrier of its own: the listing it serves
// (List) takes one, and a second round trip to the leader on every
// attention listing would buy nothing an operator could see. A record
// that began running on a dead node after this node's last applied entry
// shows on the next listing.
func (s *Store) RunningNodes(context.Context) ([]string, error) {
	return s.n.fsm.RunningNodes(), nil
}

// Cancel implements store.Store.
func (s *Store) Cancel(ctx context.Context, executionID string, res store.Result) (store.Record, error) {
	resp, err := s.apply(ctx, fsm.Cancel(executionID, res))
	return resp.Record, err
}

// Resolve implements store.Store.
func (s *Store) Resolve(ctx context.Context, executionID string, r store.Resolution) (store.Record, error) {
	resp, err := s.apply(ctx, fsm.Resolve(executionID, r))
	return resp.Record, err
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, executionID string, allowRunning bool) (store.Record, error) {
	resp, err := s.apply(ctx, fsm.Release(executionID, allowRunning))
	return resp.Record, err
}

// Decide implements store.Store: one command through the log, which the
// state machine decides, so that of concurrent decisions (from any nodes)
// the first committed applies and the others answer the record it left.
func (s *Store) Decide(ctx context.Context, executionID string, d store.Decision) (store.Record, error) {
	if err := d.Validate(); err != nil {
		return store.Record{}, err
	}
	resp, err := s.apply(ctx, fsm.Decide(executionID, d))
	return resp.Record, err
}

// MarkInterrupted implements store.Store.
func (s *Store) MarkInterrupted(ctx context.Context, nodeID string) (int, error) {
	resp, err := s.apply(ctx, fsm.Interrupt(nodeID))
	return resp.Count, err
}

// Expire implements store.Expirer.
func (s *Store) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	resp, err := s.apply(ctx, fsm.Expire(cutoff))
	return resp.Count, err
}

// Stats implements store.Store: this node's applied state.
func (s *Store) Stats(context.Context) (store.Stats, error) { return s.n.fsm.Stats(), nil }

// Interrupted implements store.InterruptedCounter, from this node's
// applied state.
func (s *Store) Interrupted(context.Context) (int, error) { return s.n.fsm.Interrupted(), nil }

// Ready reports whether the node can serve (engine.Readier): it knows a
// leader and has caught up.
func (s *Store) Ready(ctx context.Context) error { return s.n.Ready(ctx) }

// RunnerGone implements engine.Liveness: gossip declared the node dead,
// or it is no longer a member.
func (s *Store) RunnerGone(nodeID string) bool { return s.n.RunnerGone(nodeID) }

// OnCancel installs the function told when a cancel of one of this node's
// executions is applied.
func (s *Store) OnCancel(fn func(executionID string)) { s.n.OnCancel(fn) }
