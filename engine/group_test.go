package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

func groupSpec(name string, c *counter) engine.ToolSpec {
	return engine.ToolSpec{Name: name, Func: c.fn, Annotations: json.RawMessage(`{"readOnlyHint":true}`)}
}

// TestToolGroupUnavailableThenListed: a declared group that cannot be
// listed answers UNAVAILABLE for every name under its prefix (not
// UNKNOWN_TOOL), reserving nothing; once set, its tools run, a name it
// does not hold is UNKNOWN_TOOL, and a replacement drops the old tools.
func TestToolGroupUnavailableThenListed(t *testing.T) {
	app := newApp(t)
	down := store.NewError(store.CodeUnavailable, "upstream tickets cannot be listed")
	if err := app.SetToolGroupUnavailable("tickets", down); err != nil {
		t.Fatal(err)
	}
	_, err := app.Call(t.Context(), alice, engine.Request{Tool: "tickets.create", RequestID: "r1"})
	if !errors.Is(err, down) || store.CodeOf(err) != store.CodeUnavailable {
		t.Fatalf("call while unavailable: %v, want %v", err, down)
	}
	if _, err := app.Store().Lookup(t.Context(), store.Key{Principal: alice.Principal, RequestID: "r1"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused call left a record: %v", err)
	}
	// Another prefix is unaffected.
	if _, err := app.Call(t.Context(), alice, engine.Request{Tool: "other.x"}); !errors.Is(err, engine.ErrUnknownTool) {
		t.Fatalf("other.x: %v, want UNKNOWN_TOOL", err)
	}

	var c counter
	gen := app.ToolsGeneration()
	if err := app.SetToolGroup("tickets", []engine.ToolSpec{groupSpec("tickets.create", &c), groupSpec("tickets.close", &c)}); err != nil {
		t.Fatal(err)
	}
	if app.ToolsGeneration() == gen {
		t.Fatal("ToolsGeneration did not change when the group's tools were set")
	}
	// The same tools again (an upstream's periodic refresh): the listing
	// did not change, so readers of the tool list need not rebuild.
	gen = app.ToolsGeneration()
	if err := app.SetToolGroup("tickets", []engine.ToolSpec{groupSpec("tickets.create", &c), groupSpec("tickets.close", &c)}); err != nil {
		t.Fatal(err)
	}
	if app.ToolsGeneration() != gen {
		t.Fatal("ToolsGeneration changed when the group was set to the tools it had")
	}
	changed := groupSpec("tickets.close", &c)
	changed.Description = "close it, now described otherwise"
	if err := app.SetToolGroup("tickets", []engine.ToolSpec{groupSpec("tickets.create", &c), changed}); err != nil {
		t.Fatal(err)
	}
	if app.ToolsGeneration() == gen {
		t.Fatal("ToolsGeneration did not change when a tool's description did")
	}
	for field, change := range map[string]func(*engine.ToolSpec){
		"title":         func(s *engine.ToolSpec) { s.Title = "Close" },
		"output schema": func(s *engine.ToolSpec) { s.OutputSchema = json.RawMessage(`{"type":"object"}`) },
		"_meta":         func(s *engine.ToolSpec) { s.Meta = json.RawMessage(`{"vendor/x":1}`) },
	} {
		gen = app.ToolsGeneration()
		change(&changed)
		if err := app.SetToolGroup("tickets", []engine.ToolSpec{groupSpec("tickets.create", &c), changed}); err != nil {
			t.Fatal(err)
		}
		if app.ToolsGeneration() == gen {
			t.Fatalf("ToolsGeneration did not change when a tool's %s did", field)
		}
	}
	call(t, app, engine.Request{Tool: "tickets.create", RequestID: "r1"})
	if resp := call(t, app, engine.Request{Tool: "tickets.create", RequestID: "r1"}); !resp.Replayed || c.runs.Load() != 1 {
		t.Fatalf("retry: replayed %v, runs %d", resp.Replayed, c.runs.Load())
	}
	if _, err := app.Call(t.Context(), alice, engine.Request{Tool: "tickets.nope"}); !errors.Is(err, engine.ErrUnknownTool) {
		t.Fatalf("tickets.nope: %v, want UNKNOWN_TOOL", err)
	}
	var names []string
	for _, ti := range app.Tools() {
		names = append(names, ti.Name)
		if string(ti.Annotations) != `{"readOnlyHint":true}` {
			t.Errorf("%s: annotations %s", ti.Name, ti.Annotations)
		}
	}
	if len(names) != 2 || names[0] != "tickets.close" || names[1] != "tickets.create" {
		t.Fatalf("tools %v", names)
	}

	// Unavailable again: the tools stay listed, a recorded identity
	// replays, a new one answers UNAVAILABLE.
	if err := app.SetToolGroupUnavailable("tickets", down); err != nil {
		t.Fatal(err)
	}
	if len(app.Tools()) != 2 {
		t.Fatalf("tools while unavailable: %v", app.Tools())
	}
	if resp, err := app.Call(t.Context(), alice, engine.Request{Tool: "tickets.create", RequestID: "r1"}); err != nil || !resp.Replayed {
		t.Fatalf("replay while unavailable: %+v, %v", resp, err)
	}
	if _, err := app.Call(t.Context(), alice, engine.Request{Tool: "tickets.create", RequestID: "r2"}); !errors.Is(err, down) {
		t.Fatalf("a new identity while unavailable: %v, want %v", err, down)
	}

	// A replacement drops what it does not hold.
	if err := app.SetToolGroup("tickets", []engine.ToolSpec{groupSpec("tickets.close", &c)}); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Call(t.Context(), alice, engine.Request{Tool: "tickets.create"}); !errors.Is(err, engine.ErrUnknownTool) {
		t.Fatalf("a dropped tool: %v, want UNKNOWN_TOOL", err)
	}
	if len(app.Tools()) != 1 {
		t.Fatalf("tools after the replacement: %v", app.Tools())
	}
}

// TestToolGroupDownAnswersHeldRecords: while a group is unavailable, the
// record the store holds answers a retry as Reserve would, read from the
// store when the backend peeks nothing (a fleet's): a finished identity
// replays, another fingerprint conflicts, a running one is uncertain,
// also on a node that never listed the group (restarted while its
// source is down). Only a call that would run the tool is refused, and
// nothing is reserved.
func TestToolGroupDownAnswersHeldRecords(t *testing.T) {
	mem := store.NewMemory(100)
	down := store.NewError(store.CodeUnavailable, "upstream tickets cannot be listed")
	var c counter
	listed := newApp(t)
	listed.IdempotencyStore(engine.Basic{Store: mem})
	if err := listed.SetToolGroup("tickets", []engine.ToolSpec{groupSpec("tickets.create", &c)}); err != nil {
		t.Fatal(err)
	}
	done := engine.Request{Tool: "tickets.create", RequestID: "r1", Arguments: json.RawMessage(`{"a":1}`)}
	first := call(t, listed, done)
	if err := listed.SetToolGroupUnavailable("tickets", down); err != nil {
		t.Fatal(err)
	}
	// Another node of the same store, whose group was never listed.
	unlisted := newApp(t)
	unlisted.IdempotencyStore(engine.Basic{Store: mem})
	if err := unlisted.SetToolGroupUnavailable("tickets", down); err != nil {
		t.Fatal(err)
	}
	fp, err := store.Fingerprint("tickets.create", json.RawMessage(`{}`), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Reserve(t.Context(), store.Key{Principal: alice.Principal, RequestID: "running"}, fp,
		store.Execution{ID: "exec_running", Tool: "tickets.create", NodeID: "elsewhere", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for name, app := range map[string]*engine.Runtime{"listed": listed, "unlisted": unlisted} {
		resp, err := app.Call(t.Context(), alice, done)
		if err != nil || !resp.Replayed || resp.Record.ExecutionID != first.Record.ExecutionID {
			t.Errorf("%s: a retry of a completed identity: %+v, %v; want its replay", name, resp, err)
		}
		var ce *store.ConflictError
		if _, err := app.Call(t.Context(), alice, engine.Request{Tool: "tickets.create", RequestID: "r1"}); !errors.As(err, &ce) {
			t.Errorf("%s: other arguments: %v; want IDEMPOTENCY_CONFLICT", name, err)
		}
		var ue *store.UncertainError
		if _, err := app.Call(t.Context(), alice, engine.Request{Tool: "tickets.create", RequestID: "running"}); !errors.As(err, &ue) {
			t.Errorf("%s: a running identity: %v; want EXECUTION_UNCERTAIN", name, err)
		}
		for _, req := range []engine.Request{
			{Tool: "tickets.create", RequestID: "new-" + name},
			{Tool: "tickets.create"},
			{Tool: "tickets.create", Task: true},
		} {
			if _, err := app.Call(t.Context(), alice, req); !errors.Is(err, down) {
				t.Errorf("%s: %+v: %v; want %v", name, req, err, down)
			}
		}
		if _, err := mem.Lookup(t.Context(), store.Key{Principal: alice.Principal, RequestID: "new-" + name}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: a refused call left a record: %v", name, err)
		}
	}
	if n := c.runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
}

// TestToolGroupRefusesForeignNames: a group's tools are named under its
// prefix and never shadow a tool registered otherwise; a failed
// replacement changes nothing.
func TestToolGroupRefusesForeignNames(t *testing.T) {
	app := newApp(t)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "tickets.static", Func: c.fn})
	for _, specs := range [][]engine.ToolSpec{
		{groupSpec("other.create", &c)},
		{groupSpec("tickets.", &c)},
		{groupSpec("tickets.static", &c)},
		{groupSpec("tickets.a", &c), groupSpec("tickets.a", &c)},
		{{Name: "tickets.bad", Func: c.fn, Annotations: json.RawMessage(`[1]`)}},
	} {
		if err := app.SetToolGroup("tickets", specs); err == nil {
			t.Errorf("SetToolGroup(%s…) succeeded", specs[0].Name)
		}
	}
	if err := app.SetToolGroup("bad.prefix", nil); err == nil {
		t.Error("a prefix with a dot was accepted")
	}
	if err := app.SetToolGroup("g", []engine.ToolSpec{groupSpec("g.a", &c)}); err != nil {
		t.Fatal(err)
	}
	if err := app.AddTool(engine.ToolSpec{Name: "g.b", Func: c.fn}); err == nil {
		t.Error("AddTool under a group's prefix succeeded")
	}
	if err := app.SetToolGroup("g", []engine.ToolSpec{groupSpec("g.b", &c), groupSpec("elsewhere.c", &c)}); err == nil {
		t.Fatal("a bad replacement succeeded")
	}
	if _, err := app.Call(context.Background(), alice, engine.Request{Tool: "g.a"}); err != nil {
		t.Fatalf("g.a after a failed replacement: %v", err)
	}
}
