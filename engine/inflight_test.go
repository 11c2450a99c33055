package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// TestInflightBytesRefuseNewCallsBeforeReserving is the bound on
// bytes in flight of docs/operations.md#overload: while one call holds arguments near the bound, a call
// whose arguments would take the node past it answers UNAVAILABLE naming
// the resource, with "tool_ran": false, and reserves and runs nothing; a
// small call that fits is taken; once the first finishes, the refused call
// runs. Overloaded tells the same before a call is read.
func TestInflightBytesRefuseNewCallsBeforeReserving(t *testing.T) {
	app := newApp(t, engine.WithMaxInflightBytes(100_000))
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "gated", Func: g.fn})
	big := json.RawMessage(`{"s":"` + strings.Repeat("x", 60_000) + `"}`)

	first := make(chan error, 1)
	go func() {
		_, err := app.Call(context.Background(), alice, engine.Request{Tool: "gated", RequestID: "big-1", Arguments: big})
		first <- err
	}()
	waitStarted(t, g, 1)
	if got := app.InflightBytes(); got < 60_000 {
		t.Fatalf("InflightBytes = %d while a call of 60 kB runs", got)
	}

	_, err := app.Call(t.Context(), alice, engine.Request{Tool: "gated", RequestID: "big-2", Arguments: big})
	var be *engine.BusyError
	if !errors.As(err, &be) || be.Limit != engine.LimitMaxInflightBytes || store.CodeOf(err) != store.CodeUnavailable ||
		be.Fields()["resource"] != engine.ResourceInflightBytes || be.Fields()[engine.FieldToolRan] != false {
		t.Fatalf("a call past the bound: %v, want UNAVAILABLE naming inflight_bytes with tool_ran false", err)
	}
	if err := app.Overloaded(int64(len(big))); !errors.As(err, &be) {
		t.Fatalf("Overloaded(%d) = %v, want the same refusal", len(big), err)
	}
	if _, err := app.Store().Lookup(context.Background(), store.Key{Principal: "alice", RequestID: "big-2"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused call left a record (%v)", err)
	}
	if g.runs.Load() != 1 {
		t.Fatalf("%d tools ran, want only the first", g.runs.Load())
	}

	// A small call still fits.
	small := make(chan error, 1)
	go func() {
		_, err := app.Call(context.Background(), alice, engine.Request{Tool: "gated", RequestID: "small", Arguments: json.RawMessage(`{"n":1}`)})
		small <- err
	}()
	waitStarted(t, g, 1)

	close(g.release)
	for _, ch := range []chan error{first, small} {
		if err := <-ch; err != nil {
			t.Fatalf("an admitted call: %v", err)
		}
	}
	// A caller is answered just before its execution's bookkeeping ends:
	// the bytes are given back by then, or a moment after.
	wait.For(t, 5*time.Second, "no bytes in flight with nothing running", func() error {
		if got := app.InflightBytes(); got != 0 {
			return fmt.Errorf("InflightBytes = %d", got)
		}
		return nil
	})
	resp := call(t, app, engine.Request{Tool: "gated", RequestID: "big-2", Arguments: big})
	mustStatus(t, resp.Record, store.StatusCompleted)
}

// TestInflightBytesNeverRefuseAResult: a call admitted under the bound
// whose result takes the node far past it is recorded and answered, not
// refused: the bound applies to new calls only.
func TestInflightBytesNeverRefuseAResult(t *testing.T) {
	app := newApp(t, engine.WithMaxInflightBytes(1_000))
	mustAdd(t, app, engine.ToolSpec{Name: "grow", Func: func(context.Context, engine.Call) (any, error) {
		return strings.Repeat("y", 50_000), nil
	}})
	resp := call(t, app, engine.Request{Tool: "grow", RequestID: "g1"})
	mustStatus(t, resp.Record, store.StatusCompleted)
	if len(resp.Record.Data) < 50_000 {
		t.Fatalf("data of %d bytes, want the whole result", len(resp.Record.Data))
	}
}
