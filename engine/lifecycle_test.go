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

// slowStore is an in-memory store that says it is not ready until told.
type slowStore struct {
	*store.Memory
	ready atomic.Bool
}

var errNotYet = errors.New("not yet")

func (s *slowStore) Ready(context.Context) error {
	if !s.ready.Load() {
		return errNotYet
	}
	return nil
}

// TestGate checks the one gate Call and Ready share: a runtime started in
// the background answers UNAVAILABLE (the node is starting) until its
// store is ready, then takes calls; once Shutdown has begun, it answers
// ErrClosed. A runtime never started in the background is never gated.
func TestGate(t *testing.T) {
	app := engine.New(engine.WithLogger(quietLogger()))
	st := &slowStore{Memory: store.NewMemory(100)}
	app.IdempotencyStore(st)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})
	req := engine.Request{Tool: "count", RequestID: "r1"}

	app.StartInBackground(t.Context())
	_, err := app.Call(t.Context(), alice, req)
	if store.CodeOf(err) != store.CodeUnavailable || errors.Is(err, engine.ErrClosed) {
		t.Fatalf("a call while starting: %v, want UNAVAILABLE (starting)", err)
	}
	if err := app.Ready(t.Context()); err == nil {
		t.Fatal("Ready while starting = nil")
	}
	st.ready.Store(true)
	testutil.Until(t, 10*time.Second, "the runtime to start", func() bool { return app.Ready(t.Context()) == nil })
	if _, err := app.Call(t.Context(), alice, req); err != nil {
		t.Fatalf("a call once started: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Call(t.Context(), alice, req); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("a call after Shutdown: %v, want ErrClosed", err)
	}
	if err := app.Ready(t.Context()); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("Ready after Shutdown: %v, want ErrClosed", err)
	}
	if c.runs.Load() != 1 {
		t.Fatalf("the tool ran %d times, want 1", c.runs.Load())
	}

	ungated := newApp(t)
	if err := ungated.Ready(t.Context()); err != nil {
		t.Fatalf("Ready of a runtime never started = %v, want nil", err)
	}
}

// TestStartingRefusalSaysNothingRan: a call refused while the node starts
// says "tool_ran": false, so a client knows a retry is safe.
func TestStartingRefusalSaysNothingRan(t *testing.T) {
	app := engine.New(engine.WithLogger(quietLogger()))
	app.IdempotencyStore(&slowStore{Memory: store.NewMemory(100)})
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})
	app.StartInBackground(t.Context())
	_, err := app.Call(t.Context(), alice, engine.Request{Tool: "count", RequestID: "r1"})
	var f interface{ Fields() map[string]any }
	if store.CodeOf(err) != store.CodeUnavailable || !errors.As(err, &f) || f.Fields()[engine.FieldToolRan] != false {
		t.Fatalf("a call while starting: %v, want UNAVAILABLE with tool_ran false", err)
	}
	if c.runs.Load() != 0 {
		t.Fatal("the tool ran")
	}
}

// TestFreshNodeTakesCallsAtOnce: a runtime whose node id ran nothing
// before (WithNoPreviousExecutions) takes calls while its store is not yet
// ready, instead of refusing them until it has marked previous
// executions it cannot have; it marks nothing interrupted.
func TestFreshNodeTakesCallsAtOnce(t *testing.T) {
	app := engine.New(engine.WithLogger(quietLogger()), engine.WithNoPreviousExecutions())
	st := &slowStore{Memory: store.NewMemory(100)}
	app.IdempotencyStore(st)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})
	app.StartInBackground(t.Context())
	if _, err := app.Call(t.Context(), alice, engine.Request{Tool: "count", RequestID: "r1"}); err != nil {
		t.Fatalf("a call on a fresh node while its store gets ready: %v, want it taken", err)
	}
	if err := app.Ready(t.Context()); !errors.Is(err, errNotYet) {
		t.Fatalf("Ready = %v, want the store's answer", err)
	}
	st.ready.Store(true)
	testutil.Until(t, 10*time.Second, "the runtime to be ready", func() bool { return app.Ready(t.Context()) == nil })
	if c.runs.Load() != 1 {
		t.Fatalf("the tool ran %d times, want 1", c.runs.Load())
	}
}
