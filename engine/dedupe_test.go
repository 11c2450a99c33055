package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestDedupeWindowWithoutRequestID: a call without request_id of a tool
// with a dedupe window takes the derived identity: replayed within the
// window, run afresh (replacing the record) after it; another call (other
// arguments, session or principal) is another identity.
func TestDedupeWindowWithoutRequestID(t *testing.T) {
	app := newApp(t)
	clock := newFakeClock()
	engine.SetClock(app, clock.now)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "create", Func: c.fn, DedupeWindow: 10 * time.Minute})
	req := engine.Request{Tool: "create", Arguments: json.RawMessage(`{"sku":"A"}`), SessionID: "s"}

	first := call(t, app, req)
	id := first.Record.Key.RequestID
	fp, _ := store.Fingerprint("create", json.RawMessage(`{"sku":"A"}`), json.RawMessage(`{}`))
	if id != "~"+fp[:32] || first.Replayed || first.Record.Status != store.StatusCompleted {
		t.Fatalf("first: request_id %q (want ~%s), replayed %v, %s", id, fp[:32], first.Replayed, first.Record.Status)
	}
	// The derived identity is a record like any other: looked up by it.
	if rec, err := app.Store().Lookup(t.Context(), store.Key{Principal: "alice", Session: "s", RequestID: id}); err != nil || rec.ExecutionID != first.Record.ExecutionID {
		t.Fatalf("lookup of the derived identity: %v %+v", err, rec)
	}

	clock.advance(10*time.Minute - time.Millisecond)
	again := call(t, app, engine.Request{Tool: "create", Arguments: json.RawMessage(`{ "sku" : "A" }`), SessionID: "s"})
	if !again.Replayed || again.Record.ExecutionID != first.Record.ExecutionID || c.runs.Load() != 1 {
		t.Fatalf("within the window: replayed %v, runs %d", again.Replayed, c.runs.Load())
	}
	// Other arguments, another session, another principal: other calls.
	call(t, app, engine.Request{Tool: "create", Arguments: json.RawMessage(`{"sku":"B"}`), SessionID: "s"})
	call(t, app, engine.Request{Tool: "create", Arguments: json.RawMessage(`{"sku":"A"}`), SessionID: "t"})
	if _, err := app.Call(t.Context(), engine.Caller{Principal: "bob"}, req); err != nil {
		t.Fatal(err)
	}
	if c.runs.Load() != 4 {
		t.Fatalf("runs %d, want 4", c.runs.Load())
	}

	clock.advance(time.Millisecond)
	fresh := call(t, app, req)
	if fresh.Replayed || fresh.Record.ExecutionID == first.Record.ExecutionID || fresh.Record.Key.RequestID != id || c.runs.Load() != 5 {
		t.Fatalf("after the window: replayed %v, execution %s, runs %d", fresh.Replayed, fresh.Record.ExecutionID, c.runs.Load())
	}
	if _, err := app.Execution(t.Context(), alice, first.Record.ExecutionID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the replaced record: %v, want NOT_FOUND", err)
	}
	if st, _ := app.Store().Stats(t.Context()); st.Entries != 4 {
		t.Fatalf("entries %d, want 4 (replaced, not kept beside)", st.Entries)
	}
	if again := call(t, app, req); !again.Replayed || again.Record.ExecutionID != fresh.Record.ExecutionID {
		t.Fatalf("the retry after the replacement: %+v", again)
	}
}

// TestDedupeWindowUncertainWhileRunning: within the window, the same
// call while the first runs is EXECUTION_UNCERTAIN, however late; the tool
// sees the derived request_id and its idempotency key.
func TestDedupeWindowUncertainWhileRunning(t *testing.T) {
	app := newApp(t)
	clock := newFakeClock()
	engine.SetClock(app, clock.now)
	g := newGate()
	var seen atomic.Value
	mustAdd(t, app, engine.ToolSpec{Name: "slow", DedupeWindow: time.Minute, Func: func(ctx context.Context, c engine.Call) (any, error) {
		seen.Store(c)
		return g.fn(ctx, c)
	}})
	var wg sync.WaitGroup
	wg.Go(func() { app.Call(t.Context(), alice, engine.Request{Tool: "slow"}) })
	<-g.started
	clock.advance(time.Hour)
	_, err := app.Call(t.Context(), alice, engine.Request{Tool: "slow"})
	if !errors.Is(err, store.ErrUncertain) {
		t.Fatalf("while running: %v, want EXECUTION_UNCERTAIN", err)
	}
	close(g.release)
	wg.Wait()
	c := seen.Load().(engine.Call)
	if !strings.HasPrefix(c.RequestID, "~") || len(c.RequestID) != 33 || c.IdempotencyKey == "" || c.FencingToken == 0 {
		t.Fatalf("the tool saw %+v", c)
	}
}

// TestDedupeWindowRules: a client request_id may not begin with "~";
// require_request_id wins over the window; a call with a request_id is
// unaffected by it; a negative window is refused.
func TestDedupeWindowRules(t *testing.T) {
	app := newApp(t)
	clock := newFakeClock()
	engine.SetClock(app, clock.now)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "w", Func: c.fn, DedupeWindow: time.Minute})
	mustAdd(t, app, engine.ToolSpec{Name: "strict", Func: c.fn, DedupeWindow: time.Minute, RequireRequestID: true})

	_, err := app.Call(t.Context(), alice, engine.Request{Tool: "w", RequestID: "~abc"})
	var fe *store.FieldError
	if !errors.As(err, &fe) || fe.Field != "request_id" {
		t.Fatalf(`request_id "~abc": %v, want INVALID_REQUEST on request_id`, err)
	}
	if _, err := app.Call(t.Context(), alice, engine.Request{Tool: "strict"}); !errors.As(err, &fe) || fe.Field != "request_id" {
		t.Fatalf("require_request_id without one: %v", err)
	}
	call(t, app, engine.Request{Tool: "w", RequestID: "r"})
	clock.advance(time.Hour)
	if again := call(t, app, engine.Request{Tool: "w", RequestID: "r"}); !again.Replayed {
		t.Fatal("a call with a request_id was run again after the window")
	}
	if err := app.AddTool(engine.ToolSpec{Name: "neg", Func: c.fn, DedupeWindow: -time.Second}); err == nil {
		t.Fatal("a negative window was accepted")
	}
}
