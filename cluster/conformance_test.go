package cluster_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/storetest"
	"github.com/carmyhq/carmy/tests/testutil"
)

// The conformance tests run side by side (t.Parallel), after the
// package's other tests: each case starts a cluster of its own on ports
// the kernel picks, and most of a case is waiting for its election.

func TestConformanceOneNode(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, capacity int) store.Store {
		c := newCluster(t, 1, func(cfg *cluster.Config) { suiteConfig(cfg, capacity) })
		waitCapacity(t, c, capacity)
		return c.nodes[0].Store()
	})
}

func TestConformanceThreeNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a 3-node cluster per case")
	}
	storetest.Run(t, func(t *testing.T, capacity int) store.Store {
		c := newCluster(t, 3, func(cfg *cluster.Config) { suiteConfig(cfg, capacity) })
		waitCapacity(t, c, capacity)
		// Spread the calls over every node: each write is forwarded or
		// applied, each read waits for the leader's read index.
		stores := make([]store.Store, len(c.nodes))
		for i, n := range c.nodes {
			stores[i] = n.Store()
		}
		return &roundRobin{stores: stores}
	})
}

// TestConformanceThreeNodesSecured runs the suite on a 3-node cluster
// with Raft over mutual TLS and gossip encrypted, as a production cluster
// runs.
func TestConformanceThreeNodesSecured(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a 3-node cluster per case")
	}
	storetest.Run(t, func(t *testing.T, capacity int) store.Store {
		files := writeTLS(t, t.TempDir(), "n1", "n2", "n3")
		c := newCluster(t, 3, func(cfg *cluster.Config) {
			f := files[cfg.NodeID]
			cfg.TLS, cfg.GossipKeys = &f, [][]byte{gossipKey}
			suiteConfig(cfg, capacity)
		})
		waitCapacity(t, c, capacity)
		stores := make([]store.Store, len(c.nodes))
		for i, n := range c.nodes {
			stores[i] = n.Store()
		}
		return &roundRobin{stores: stores}
	})
}

// TestApprovalConformance runs the approval gates' cases on one node and
// on three (each call to the next node's store: decisions forwarded to
// the leader, as from a follower's endpoint).
func TestApprovalConformance(t *testing.T) {
	t.Parallel()
	t.Run("OneNode", func(t *testing.T) {
		t.Parallel()
		storetest.RunApproval(t, func(t *testing.T, capacity int) store.Store {
			c := newCluster(t, 1, func(cfg *cluster.Config) { suiteConfig(cfg, capacity) })
			waitCapacity(t, c, capacity)
			return c.nodes[0].Store()
		})
	})
	t.Run("ThreeNodes", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a 3-node cluster per case")
		}
		t.Parallel()
		storetest.RunApproval(t, func(t *testing.T, capacity int) store.Store {
			c := newCluster(t, 3, func(cfg *cluster.Config) { suiteConfig(cfg, capacity) })
			waitCapacity(t, c, capacity)
			stores := make([]store.Store, len(c.nodes))
			for i, n := range c.nodes {
				stores[i] = n.Store()
			}
			return &roundRobin{stores: stores}
		})
	})
}

// suiteConfig sets a suite's capacity, and a DeadGrace no case lasts:
// the suite's executions name nodes that are not members ("node-a"…),
// whose running executions the leader would otherwise mark interrupted
// DeadGrace after it first saw them (interruptStrays), under a case that
// checks them running or interrupts them itself, once a loaded machine
// makes that case last a second or two.
func suiteConfig(cfg *cluster.Config, capacity int) {
	cfg.MaxEntries, cfg.DeadGrace = capacity, time.Hour
}

func waitCapacity(t *testing.T, c *testCluster, capacity int) {
	testutil.WaitUntil(t, 10*time.Second, "the capacity to apply on every node", func() bool {
		for _, n := range c.nodes {
			if n.FSM().Stats().Capacity != capacity {
				return false
			}
		}
		return true
	})
}

// roundRobin sends each call to the next node's store.
type roundRobin struct {
	stores []store.Store
	next   atomic.Uint64
}

func (r *roundRobin) pick() store.Store {
	return r.stores[int(r.next.Add(1))%len(r.stores)]
}

// attempt sends a write to the next node's store, and again to the node
// after while it is answered unavailable or of unknown outcome (a leader
// lost mid-commit, which a loaded machine's short test timers make
// happen), at most 20 times. unknown says whether an attempt's outcome
// was unknown: that attempt may have applied, and its caller must find
// out, as the Store contract asks. A write refused before any unknown
// outcome comes back as it was, so the suite's checks of refusals hold.
func attempt[T any](ctx context.Context, r *roundRobin, do func(store.Store) (T, error)) (v T, unknown bool, err error) {
	for i := 0; ; i++ {
		v, err = do(r.pick())
		unknown = unknown || errors.Is(err, store.ErrCommitUnknown)
		if i == 20 || ctx.Err() != nil || !errors.Is(err, store.ErrCommitUnknown) && !errors.Is(err, store.ErrUnavailable) {
			return v, unknown, err
		}
	}
}

// Reserve finds out an unknown outcome (attempt): a record that turns out
// to hold this execution is this call's reservation, whatever the retry
// was answered by its state (Uncertain while it runs, Awaiting while its
// approval is pending): the record says which. Two executions can still
// never both be Reserved, which is what the suite checks.
func (r *roundRobin) Reserve(ctx context.Context, k store.Key, fp string, ex store.Execution) (store.Reservation, error) {
	res, unknown, err := attempt(ctx, r, func(s store.Store) (store.Reservation, error) { return s.Reserve(ctx, k, fp, ex) })
	if err == nil && unknown && res.Record.ExecutionID == ex.ID {
		res.Outcome = store.Reserved
	}
	return res, err
}
func (r *roundRobin) Complete(ctx context.Context, k store.Key, fp string, res store.Result) (store.Record, error) {
	return r.write(ctx, res.ExecutionID, func(s store.Store) (store.Record, error) {
		return s.Complete(ctx, k, fp, res)
	}, func(rec store.Record) bool { return rec.Status == res.Status })
}
func (r *roundRobin) Get(ctx context.Context, id string) (store.Record, error) {
	return r.pick().Get(ctx, id)
}
func (r *roundRobin) Lookup(ctx context.Context, k store.Key) (store.Record, error) {
	return r.pick().Lookup(ctx, k)
}
func (r *roundRobin) List(ctx context.Context, q store.ListQuery) (store.Page, error) {
	return r.pick().List(ctx, q)
}
func (r *roundRobin) Cancel(ctx context.Context, id string, res store.Result) (store.Record, error) {
	return r.write(ctx, id, func(s store.Store) (store.Record, error) {
		return s.Cancel(ctx, id, res)
	}, func(rec store.Record) bool { return rec.Status == store.StatusCancelled })
}
func (r *roundRobin) Resolve(ctx context.Context, id string, rs store.Resolution) (store.Record, error) {
	return r.write(ctx, id, func(s store.Store) (store.Record, error) {
		return s.Resolve(ctx, id, rs)
	}, func(rec store.Record) bool { return rec.Status == rs.Status && rec.ResolvedBy == rs.By })
}
func (r *roundRobin) Release(ctx context.Context, id string, allowRunning bool) (store.Record, error) {
	return r.pick().Release(ctx, id, allowRunning)
}
func (r *roundRobin) Decide(ctx context.Context, id string, d store.Decision) (store.Record, error) {
	return r.write(ctx, id, func(s store.Store) (store.Record, error) {
		return s.Decide(ctx, id, d)
	}, func(rec store.Record) bool {
		return rec.Decision != nil && rec.Decision.By == d.Actor && rec.Decision.At.Equal(d.At)
	})
}

// write sends a write on an execution's record (attempt), and finds out
// an unknown outcome: when the retry is refused because the record has
// moved on, a record of this execution that shows the write applied is
// this write's answer.
func (r *roundRobin) write(ctx context.Context, id string, do func(store.Store) (store.Record, error), applied func(store.Record) bool) (store.Record, error) {
	rec, unknown, err := attempt(ctx, r, do)
	var se *store.StateError
	if unknown && errors.As(err, &se) && se.Record.ExecutionID == id && applied(se.Record) {
		return se.Record, nil
	}
	return rec, err
}

// MarkInterrupted finds out an unknown outcome (attempt): a retry after
// an attempt that applied marks nothing, so the count is then the node's
// interrupted records after the last attempt less those before the first
// (the suite's cases run one call at a time on their store).
func (r *roundRobin) MarkInterrupted(ctx context.Context, node string) (int, error) {
	before, err := r.interruptedOf(ctx, node)
	if err != nil {
		return 0, err
	}
	n, unknown, err := attempt(ctx, r, func(s store.Store) (int, error) { return s.MarkInterrupted(ctx, node) })
	if err != nil || !unknown {
		return n, err
	}
	after, err := r.interruptedOf(ctx, node)
	if err != nil {
		return 0, err
	}
	return after - before, nil
}

// interruptedOf counts the interrupted records of node.
func (r *roundRobin) interruptedOf(ctx context.Context, node string) (int, error) {
	p, err := r.List(ctx, store.ListQuery{AllPrincipals: true, AllSessions: true, Statuses: []store.Status{store.StatusInterrupted}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range p.Records {
		if rec.NodeID == node {
			n++
		}
	}
	return n, nil
}
func (r *roundRobin) Stats(ctx context.Context) (store.Stats, error) {
	// Stats is a node's applied state; read it after a barrier.
	s := r.pick()
	if rb, ok := s.(interface{ Node() *cluster.Node }); ok {
		if err := rb.Node().ReadBarrier(ctx); err != nil {
			return store.Stats{}, err
		}
	}
	return s.Stats(ctx)
}
