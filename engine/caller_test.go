package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

func TestCallerMayCall(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tools  *engine.ToolSet
		tool   string
		allows bool
	}{
		{"nil allows every tool", nil, "anything", true},
		{"a listed tool", engine.NewToolSet("echo", "count"), "count", true},
		{"a tool not listed", engine.NewToolSet("echo"), "count", false},
		{"names are exact", engine.NewToolSet("echo"), "Echo", false},
		{"an empty set allows none", engine.NewToolSet(), "echo", false},
		{"the zero set allows none", &engine.ToolSet{}, "echo", false},
	} {
		if got := (engine.Caller{Principal: "p", Tools: tc.tools}).MayCall(tc.tool); got != tc.allows {
			t.Errorf("%s: MayCall(%q) = %v, want %v", tc.name, tc.tool, got, tc.allows)
		}
	}
}

// TestCallOutsideTheAllowListIsForbidden checks that a call of a tool
// outside the caller's Tools is FORBIDDEN before anything else: whether
// the tool exists or not, whatever else is wrong with the call, and
// without a reservation or a run.
func TestCallOutsideTheAllowListIsForbidden(t *testing.T) {
	app := newApp(t)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})
	mustAdd(t, app, engine.ToolSpec{Name: "echo", Func: c.fn})
	planner := engine.Caller{Principal: "planner", Tools: engine.NewToolSet("echo")}
	for _, req := range []engine.Request{
		{Tool: "count", RequestID: "r1"},
		{Tool: "count"},
		{Tool: "nope", RequestID: "r2"},
		{Tool: "count", RequestID: "not a valid id"},
	} {
		_, err := app.Call(t.Context(), planner, req)
		var fe *engine.ForbiddenError
		if !errors.As(err, &fe) || !errors.Is(err, engine.ErrForbidden) || store.CodeOf(err) != store.CodeForbidden ||
			fe.Principal != "planner" || fe.Tool != req.Tool {
			t.Fatalf("Call(%+v) = %v, want FORBIDDEN naming planner and %s", req, err, req.Tool)
		}
		if want := `principal "planner" may not call tool "` + req.Tool + `"`; err.Error() != want {
			t.Errorf("message = %q, want %q", err.Error(), want)
		}
	}
	if st, _ := app.Store().Stats(t.Context()); st.Entries != 0 || c.runs.Load() != 0 {
		t.Fatalf("forbidden calls reserved %d records and ran the tool %d times", st.Entries, c.runs.Load())
	}
	if resp := call(t, app, engine.Request{Tool: "echo", RequestID: "r1"}); resp.Record.Status != store.StatusCompleted {
		t.Fatalf("an allowed call: %+v", resp)
	}
	if _, err := app.Call(t.Context(), planner, engine.Request{Tool: "echo", RequestID: "r3"}); err != nil {
		t.Fatalf("planner's call of an allowed tool: %v", err)
	}
}

// TestAllowListReachesExecutions checks that an execution of a tool
// outside the caller's Tools reads as absent (store.ErrNotFound, so ids
// cannot be probed) to Execution, Lookup, Cancel and Resolve, which then
// change nothing, and is left out of List.
func TestAllowListReachesExecutions(t *testing.T) {
	app := newApp(t)
	mustAdd(t, app, engine.ToolSpec{Name: "t", Func: (&counter{}).fn})
	hidden := leftRunning(t, app, "node9", "hidden", "hidden_tool")
	shown := leftRunning(t, app, "node9", "shown", "t")
	restricted := engine.Caller{Principal: "alice", Tools: engine.NewToolSet("t")}
	ctx := t.Context()

	if _, err := app.Execution(ctx, restricted, hidden.ExecutionID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Execution of a tool outside the allow-list: %v, want ErrNotFound", err)
	}
	if _, err := app.Lookup(ctx, restricted, "", "hidden"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Lookup of a tool outside the allow-list: %v, want ErrNotFound", err)
	}
	if _, err := app.Cancel(ctx, restricted, hidden.ExecutionID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Cancel of a tool outside the allow-list: %v, want ErrNotFound", err)
	}
	if _, err := app.Resolve(ctx, restricted, hidden.ExecutionID, engine.Resolution{Status: engine.ResolutionReleased}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Resolve of a tool outside the allow-list: %v, want ErrNotFound", err)
	}
	if rec, err := app.Store().Get(ctx, hidden.ExecutionID); err != nil || rec.Status != store.StatusRunning {
		t.Fatalf("the hidden execution is now %+v, %v; want it running, untouched", rec, err)
	}
	page, err := app.List(ctx, restricted, engine.ListRequest{})
	if err != nil || len(page.Records) != 1 || page.Records[0].ExecutionID != shown.ExecutionID {
		t.Fatalf("List = %+v, %v; want only the allowed tool's execution", page.Records, err)
	}
	// The allowed tool's execution is reachable; so is the other to a
	// caller allowed every tool.
	if _, err := app.Lookup(ctx, restricted, "", "shown"); err != nil {
		t.Errorf("Lookup of an allowed tool: %v", err)
	}
	if rec, err := app.Cancel(ctx, restricted, shown.ExecutionID); err != nil || rec.Status != store.StatusCancelled {
		t.Errorf("Cancel of an allowed tool: %+v, %v", rec, err)
	}
	if _, err := app.Execution(ctx, alice, hidden.ExecutionID); err != nil {
		t.Errorf("Execution by a caller allowed every tool: %v", err)
	}
	if page, err := app.List(ctx, alice, engine.ListRequest{}); err != nil || len(page.Records) != 2 {
		t.Errorf("List by a caller allowed every tool: %d records, %v; want 2", len(page.Records), err)
	}
}

// countingStore counts the reads of executions by id.
type countingStore struct {
	*store.Memory
	gets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, id string) (store.Record, error) {
	s.gets.Add(1)
	return s.Memory.Get(ctx, id)
}

// TestCancelAndResolveReadOnce checks that a cancel or a resolve reads
// the execution once (on a cluster, one read barrier) to authorize it,
// then acts.
func TestCancelAndResolveReadOnce(t *testing.T) {
	app := newApp(t)
	st := &countingStore{Memory: store.NewMemory(100)}
	app.IdempotencyStore(st)
	mustAdd(t, app, engine.ToolSpec{Name: "t", Func: (&counter{}).fn})
	caller := engine.Caller{Principal: "alice", Tools: engine.NewToolSet("t")}

	running := leftRunning(t, app, "node9", "running", "t")
	if _, err := app.Cancel(t.Context(), caller, running.ExecutionID); err != nil {
		t.Fatal(err)
	}
	if n := st.gets.Load(); n != 1 {
		t.Errorf("Cancel read the execution %d times, want 1", n)
	}
	st.gets.Store(0)
	gone := leftRunning(t, app, engine.DefaultNodeID, "gone", "t") // this node's, not running here
	if _, err := app.Resolve(t.Context(), caller, gone.ExecutionID, engine.Resolution{Status: engine.ResolutionReleased}); err != nil {
		t.Fatal(err)
	}
	if n := st.gets.Load(); n != 1 {
		t.Errorf("Resolve read the execution %d times, want 1", n)
	}
}
