package engine_test

import (
	"testing"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// TestBasicBackend: a store that knows nothing beside its records, made a
// backend by Basic, serves calls: the retry is answered by Reserve (no
// peek), the runtime is ready, and no other node's runner is known to be
// gone, so only interrupted records need attention.
func TestBasicBackend(t *testing.T) {
	app := newApp(t)
	app.IdempotencyStore(engine.Basic{Store: store.NewMemory(10)})
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})
	if err := app.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	first := call(t, app, engine.Request{Tool: "count", RequestID: "b1"})
	again := call(t, app, engine.Request{Tool: "count", RequestID: "b1"})
	if !again.Replayed || again.Record.ExecutionID != first.Record.ExecutionID || c.runs.Load() != 1 {
		t.Fatalf("retry = %+v (runs %d), want a replay of %s", again, c.runs.Load(), first.Record.ExecutionID)
	}
	if err := app.Ready(t.Context()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	seeded(t, app, "alice", "", "elsewhere", "count", "node9")
	wantIDs(t, "attention", listIDs(t, app, alice, engine.ListRequest{Attention: true}))
}
