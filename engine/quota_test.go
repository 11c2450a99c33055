package engine_test

import (
	"errors"
	"testing"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// TestCallQuota checks the runtime alone: Caller.MaxEntries reaches the
// store, and the refusal is a *store.QuotaError matching ErrCapacity.
func TestCallQuota(t *testing.T) {
	app := newApp(t)
	app.IdempotencyStore(store.NewMemory(100))
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})
	bounded := engine.Caller{Principal: "alice", MaxEntries: 1}
	if _, err := app.Call(t.Context(), bounded, engine.Request{Tool: "count", RequestID: "r1"}); err != nil {
		t.Fatal(err)
	}
	_, err := app.Call(t.Context(), bounded, engine.Request{Tool: "count", RequestID: "r2"})
	wantErrIs(t, err, store.ErrCapacity)
	var qe *store.QuotaError
	if !errors.As(err, &qe) || qe.Principal != "alice" || qe.Quota != 1 || store.CodeOf(err) != "IDEMPOTENCY_CAPACITY" {
		t.Fatalf("err = %v, want a *store.QuotaError of alice at 1", err)
	}
	if c.runs.Load() != 1 {
		t.Fatalf("the tool ran %d times, want 1", c.runs.Load())
	}
	// The same principal without a bound is bound by the store alone.
	if _, err := app.Call(t.Context(), alice, engine.Request{Tool: "count", RequestID: "r2"}); err != nil {
		t.Fatalf("unbounded call: %v", err)
	}
	_, err = app.Call(t.Context(), engine.Caller{Principal: "alice", MaxEntries: -1}, engine.Request{Tool: "count", RequestID: "r3"})
	wantField(t, err, "principal")
}
