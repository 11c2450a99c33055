package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/carmyhq/carmy/store"
)

// The Fleet's store.Store: each method is the open Store's, or
// store.ErrUnavailable before Run has opened the tables. Reserve also
// refuses while the node is not Ready (its heartbeat failing or past its
// lease): nothing new starts on a node the others may hold dead.

// Reserve implements store.Store.
func (f *Fleet) Reserve(ctx context.Context, key store.Key, fingerprint string, exec store.Execution) (store.Reservation, error) {
	s, err := f.store()
	if err != nil {
		return store.Reservation{}, err
	}
	if err := f.Ready(ctx); err != nil {
		return store.Reservation{}, fmt.Errorf("reserve: %w", err)
	}
	return s.Reserve(ctx, key, fingerprint, exec)
}

// Complete implements store.Store.
func (f *Fleet) Complete(ctx context.Context, key store.Key, fingerprint string, res store.Result) (store.Record, error) {
	s, err := f.store()
	if err != nil {
		return store.Record{}, err
	}
	return s.Complete(ctx, key, fingerprint, res)
}

// Get implements store.Store.
func (f *Fleet) Get(ctx context.Context, executionID string) (store.Record, error) {
	s, err := f.store()
	if err != nil {
		return store.Record{}, err
	}
	return s.Get(ctx, executionID)
}

// Lookup implements store.Store.
func (f *Fleet) Lookup(ctx context.Context, key store.Key) (store.Record, error) {
	s, err := f.store()
	if err != nil {
		return store.Record{}, err
	}
	return s.Lookup(ctx, key)
}

// List implements store.Store.
func (f *Fleet) List(ctx context.Context, q store.ListQuery) (store.Page, error) {
	s, err := f.store()
	if err != nil {
		return store.Page{}, err
	}
	return s.List(ctx, q)
}

// Cancel implements store.Store.
func (f *Fleet) Cancel(ctx context.Context, executionID string, res store.Result) (store.Record, error) {
	s, err := f.store()
	if err != nil {
		return store.Record{}, err
	}
	return s.Cancel(ctx, executionID, res)
}

// Resolve implements store.Store.
func (f *Fleet) Resolve(ctx context.Context, executionID string, r store.Resolution) (store.Record, error) {
	s, err := f.store()
	if err != nil {
		return store.Record{}, err
	}
	return s.Resolve(ctx, executionID, r)
}

// Decide implements store.Store. An approval, which names this node as
// the runner, is refused while the node is not Ready, as a reservation
// is; a denial or an expiry starts nothing and is not.
func (f *Fleet) Decide(ctx context.Context, executionID string, d store.Decision) (store.Record, error) {
	s, err := f.store()
	if err != nil {
		return store.Record{}, err
	}
	if d.Kind == store.DecisionApprove {
		if err := f.Ready(ctx); err != nil {
			return store.Record{}, fmt.Errorf("approve: %w", err)
		}
	}
	return s.Decide(ctx, executionID, d)
}

// Release implements store.Store.
func (f *Fleet) Release(ctx context.Context, executionID string, allowRunning bool) (store.Record, error) {
	s, err := f.store()
	if err != nil {
		return store.Record{}, err
	}
	return s.Release(ctx, executionID, allowRunning)
}

// MarkInterrupted implements store.Store.
func (f *Fleet) MarkInterrupted(ctx context.Context, nodeID string) (int, error) {
	s, err := f.store()
	if err != nil {
		return 0, err
	}
	return s.MarkInterrupted(ctx, nodeID)
}

// Stats implements store.Store.
func (f *Fleet) Stats(ctx context.Context) (store.Stats, error) {
	s, err := f.store()
	if err != nil {
		return store.Stats{Capacity: f.storeCfg.withDefaults().Capacity, MaxBytes: f.storeCfg.MaxBytes}, err
	}
	return s.Stats(ctx)
}

// Expire implements store.Expirer.
func (f *Fleet) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	s, err := f.store()
	if err != nil {
		return 0, err
	}
	return s.Expire(ctx, cutoff)
}

// Interrupted implements store.InterruptedCounter.
func (f *Fleet) Interrupted(ctx context.Context) (int, error) {
	s, err := f.store()
	if err != nil {
		return 0, err
	}
	return s.Interrupted(ctx)
}

// RunningNodes implements store.RunningNodeLister.
func (f *Fleet) RunningNodes(ctx context.Context) ([]string, error) {
	s, err := f.store()
	if err != nil {
		return nil, err
	}
	return s.RunningNodes(ctx)
}
