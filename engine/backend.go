package engine

import (
	"context"

	"github.com/carmyhq/carmy/store"
)

// Backend is everything the runtime asks of where its records live: the
// store itself and what a cluster, a fleet or a single process knows
// beside it. Each method is required, so that a type wrapping a backend
// that forgets one no longer compiles where it is installed
// (IdempotencyStore) rather than silently losing it.
//
// *store.Memory is a Backend (one process: always ready, no other
// runners), as are a cluster node's store (cluster.Store) and a
// PostgreSQL fleet node (postgres.Fleet). A plain store.Store becomes
// one with Basic.
type Backend interface {
	store.Store
	// PeekFinished answers a retry of a finished record from local state,
	// without a write (store.Peeker); ok is false when it cannot.
	store.Peeker
	// RunningNodes names the nodes holding running records
	// (store.RunningNodeLister): those whose liveness an attention
	// listing asks.
	store.RunningNodeLister
	// Interrupted counts the interrupted records
	// (store.InterruptedCounter), for the carmy_executions_interrupted
	// gauge.
	store.InterruptedCounter
	// RunnerGone tells whether another node's runner is known to be gone.
	Liveness
	// Ready tells whether the node can serve calls.
	Readier
	// OnCancel delivers the cancels applied on other nodes' behalf.
	CancelNotifier
}

// Readier tells whether a backend can serve (a cluster member that knows
// a leader and has caught up; a fleet node whose heartbeat holds).
type Readier interface {
	Ready(ctx context.Context) error
}

// CancelNotifier delivers cancels: a replicated backend tells the runtime
// when a cancel of one of its executions is applied, wherever it was
// asked. A backend of one process delivers none: the runtime cancels its
// own executions itself.
type CancelNotifier interface {
	OnCancel(fn func(executionID string))
}

// Basic is the Backend of a store that knows nothing beside its records,
// used by one process or by processes that do not know of each other:
// it peeks nothing (every call goes through Reserve), names no running
// nodes, counts no interrupted records (the gauge shows 0), knows no
// runner gone, is always ready and delivers no cancels. A store that can
// do more implements Backend itself.
type Basic struct{ store.Store }

var _ Backend = Basic{}

// PeekFinished implements store.Peeker: never.
func (Basic) PeekFinished(store.Key) (store.Record, bool) { return store.Record{}, false }

// RunningNodes implements store.RunningNodeLister: none.
func (Basic) RunningNodes(context.Context) ([]string, error) { return nil, nil }

// Interrupted implements store.InterruptedCounter: 0.
func (Basic) Interrupted(context.Context) (int, error) { return 0, nil }

// RunnerGone implements Liveness: no runner is known to be gone.
func (Basic) RunnerGone(string) bool { return false }

// Ready implements Readier: always.
func (Basic) Ready(context.Context) error { return nil }

// OnCancel implements CancelNotifier: no cancel is applied on another's
// behalf.
func (Basic) OnCancel(func(string)) {}
