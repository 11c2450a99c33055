package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// faultyStore is a real in-memory store with faults injected in front of
// it: the runtime's handling of store failures is what is under test.
type faultyStore struct {
	*store.Memory
	// reserveApplyThenFail applies a Reserve, then reports the commit as
	// unknown, like a leader lost mid-commit.
	reserveApplyThenFail atomic.Bool
	// completeFailures fails that many Complete calls with ErrUnavailable.
	completeFailures atomic.Int64
	// releaseFailures fails that many Release calls with ErrUnavailable.
	releaseFailures atomic.Int64
	// decideApplyThenFail applies a Decide, then reports the commit as
	// unknown.
	decideApplyThenFail atomic.Bool
	// getFailures fails that many Get calls with ErrUnavailable.
	getFailures atomic.Int64
}

func (f *faultyStore) Decide(ctx context.Context, id string, d store.Decision) (store.Record, error) {
	rec, err := f.Memory.Decide(ctx, id, d)
	if err == nil && f.decideApplyThenFail.Load() {
		return store.Record{}, store.ErrCommitUnknown
	}
	return rec, err
}

func (f *faultyStore) Get(ctx context.Context, id string) (store.Record, error) {
	if f.getFailures.Add(-1) >= 0 {
		return store.Record{}, store.ErrUnavailable
	}
	return f.Memory.Get(ctx, id)
}

func (f *faultyStore) Reserve(ctx context.Context, k store.Key, fp string, ex store.Execution) (store.Reservation, error) {
	res, err := f.Memory.Reserve(ctx, k, fp, ex)
	if err == nil && f.reserveApplyThenFail.Load() {
		return store.Reservation{}, store.ErrCommitUnknown
	}
	return res, err
}

func (f *faultyStore) Complete(ctx context.Context, k store.Key, fp string, res store.Result) (store.Record, error) {
	if f.completeFailures.Add(-1) >= 0 {
		return store.Record{}, store.ErrUnavailable
	}
	return f.Memory.Complete(ctx, k, fp, res)
}

func (f *faultyStore) Release(ctx context.Context, id string, allowRunning bool) (store.Record, error) {
	if f.releaseFailures.Add(-1) >= 0 {
		return store.Record{}, store.ErrUnavailable
	}
	return f.Memory.Release(ctx, id, allowRunning)
}

func TestUnknownReserveCommitIsReleased(t *testing.T) {
	app := newApp(t)
	fs := &faultyStore{Memory: store.NewMemory(10)}
	fs.reserveApplyThenFail.Store(true)
	fs.releaseFailures.Store(2)
	app.IdempotencyStore(fs)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})

	_, err := app.Call(t.Context(), alice, engine.Request{Tool: "count", RequestID: "u1"})
	wantErrIs(t, err, store.ErrUnavailable)
	if store.CodeOf(err) != "UNAVAILABLE" || c.runs.Load() != 0 {
		t.Fatalf("code %q, runs %d: the tool must not run when the reservation is unconfirmed", store.CodeOf(err), c.runs.Load())
	}
	// The answer says so ("tool_ran": false): a retry is safe.
	var f interface{ Fields() map[string]any }
	if !errors.As(err, &f) || f.Fields()[engine.FieldToolRan] != false {
		t.Fatalf("an unconfirmed reservation's answer %v: want %q false among its fields", err, engine.FieldToolRan)
	}
	// The node releases its never-run reservation once it can.
	testutil.Until(t, 10*time.Second, "the reservation to be released", func() bool {
		_, err := fs.Memory.Lookup(context.Background(), store.Key{Principal: "alice", RequestID: "u1"})
		return errors.Is(err, store.ErrNotFound)
	})
	fs.reserveApplyThenFail.Store(false)
	resp := call(t, app, engine.Request{Tool: "count", RequestID: "u1"})
	mustStatus(t, resp.Record, store.StatusCompleted)
	if c.runs.Load() != 1 {
		t.Fatalf("tool ran %d times, want 1", c.runs.Load())
	}
}

func TestCompletionIsRetriedUntilRecorded(t *testing.T) {
	app := newApp(t)
	fs := &faultyStore{Memory: store.NewMemory(10)}
	fs.completeFailures.Store(3)
	app.IdempotencyStore(fs)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})
	resp := call(t, app, engine.Request{Tool: "count", RequestID: "c1"})
	mustStatus(t, resp.Record, store.StatusCompleted)
	if fs.completeFailures.Load() >= 0 {
		t.Fatal("Complete was not retried")
	}
}

func TestUnrecordedOutcomeAnswersUnavailableThenReplays(t *testing.T) {
	app := newApp(t, engine.WithStoreTimeout(30*time.Millisecond))
	fs := &faultyStore{Memory: store.NewMemory(10)}
	fs.completeFailures.Store(1 << 40)
	app.IdempotencyStore(fs)
	var c counter
	// The caller waits for the outcome the store timeout plus the tool's
	// timeout (docs/operations.md#overload).
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn, Timeout: 50 * time.Millisecond})
	req := engine.Request{Tool: "count", RequestID: "c2"}

	_, err := app.Call(t.Context(), alice, req)
	wantErrIs(t, err, store.ErrUnavailable)
	// Meanwhile the identity is uncertain, never run again. While the
	// completion waits for the store, the node may also refuse new work
	// before reserving (BusyError: its calls wait for the store longer than
	// StoreTimeout/4); that refusal runs nothing either, so ask again.
	testutil.Until(t, 10*time.Second, "the retry to be answered uncertain", func() bool {
		_, err = app.Call(t.Context(), alice, req)
		var busy *engine.BusyError
		if errors.As(err, &busy) {
			return false
		}
		wantErrIs(t, err, store.ErrUncertain)
		return true
	})

	fs.completeFailures.Store(0)
	testutil.Until(t, 10*time.Second, "the outcome to be recorded", func() bool {
		rec, err := fs.Memory.Lookup(context.Background(), store.Key{Principal: "alice", RequestID: "c2"})
		return err == nil && rec.Status == store.StatusCompleted
	})
	if resp := call(t, app, req); !resp.Replayed || c.runs.Load() != 1 {
		t.Fatalf("retry = %+v, runs %d; want the replay of the one run", resp, c.runs.Load())
	}
}

// TestUnknownApprovalCommitRuns: an approval whose commit is reported
// unknown, though it committed naming this node, is found out once the
// store answers again, and the tool runs here once, its outcome recorded;
// without that, the record would stay running on a live node for ever.
func TestUnknownApprovalCommitRuns(t *testing.T) {
	app := newApp(t)
	fs := &faultyStore{Memory: store.NewMemory(10)}
	app.IdempotencyStore(fs)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "pay", Func: c.fn, Approval: &engine.Approval{Approvers: []string{"bob"}}})
	resp, err := app.Call(t.Context(), alice, engine.Request{Tool: "pay", RequestID: "g1"})
	if err != nil || resp.Record.Status != store.StatusAwaitingApproval {
		t.Fatalf("gated call: %+v, %v", resp.Record, err)
	}
	id := resp.Record.ExecutionID
	fs.decideApplyThenFail.Store(true)
	_, err = app.Decide(t.Context(), engine.Caller{Principal: "bob"}, id, store.DecisionApprove, "")
	wantErrIs(t, err, store.ErrCommitUnknown)
	fs.getFailures.Store(2) // the store is still away for a moment
	testutil.Until(t, 10*time.Second, "the approved execution to complete", func() bool {
		rec, err := fs.Memory.Get(context.Background(), id)
		return err == nil && rec.Status == store.StatusCompleted
	})
	if c.runs.Load() != 1 || app.Running() != 0 {
		t.Fatalf("tool ran %d times, %d still registered; want 1 and 0", c.runs.Load(), app.Running())
	}
}
