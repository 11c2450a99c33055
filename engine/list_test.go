package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// seeded reserves a running record of principal's identity in session,
// of tool, run by node, straight in app's store, and returns its
// execution id.
func seeded(t *testing.T, app *engine.Runtime, principal, session, requestID, tool, node string) string {
	t.Helper()
	fp, err := store.Fingerprint(tool, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	res, err := app.Store().Reserve(t.Context(), store.Key{Principal: principal, Session: session, RequestID: requestID}, fp,
		store.Execution{ID: engine.NewExecutionID(now), Tool: tool, NodeID: node, StartedAt: now})
	if err != nil || res.Outcome != store.Reserved {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	return res.Record.ExecutionID
}

// listIDs lists with req and returns the execution ids of the page.
func listIDs(t *testing.T, app *engine.Runtime, caller engine.Caller, req engine.ListRequest) []string {
	t.Helper()
	page, err := app.List(t.Context(), caller, req)
	if err != nil {
		t.Fatalf("List(%+v) by %s: %v", req, caller.Principal, err)
	}
	var ids []string
	for _, r := range page.Records {
		ids = append(ids, r.ExecutionID)
	}
	return ids
}

func wantIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: listed %v, want %v", what, got, want)
	}
}

func TestListSessionsAndPrincipals(t *testing.T) {
	app := newApp(t)
	admin := engine.Caller{Principal: "root", Admin: true}
	bob := engine.Caller{Principal: "bob"}
	a1 := seeded(t, app, "alice", "", "a1", "t", engine.DefaultNodeID)
	a2 := seeded(t, app, "alice", "s1", "a2", "t", engine.DefaultNodeID)
	b1 := seeded(t, app, "bob", "s2", "b1", "t", engine.DefaultNodeID)

	wantIDs(t, "alice's session \"\"", listIDs(t, app, alice, engine.ListRequest{}), a1)
	wantIDs(t, "alice's every session", listIDs(t, app, alice, engine.ListRequest{AllSessions: true}), a2, a1)
	wantIDs(t, "alice naming herself", listIDs(t, app, alice, engine.ListRequest{AllSessions: true, Principal: "alice"}), a2, a1)
	wantIDs(t, "the admin's every session", listIDs(t, app, admin, engine.ListRequest{AllSessions: true}), b1, a2, a1)
	wantIDs(t, "the admin's one session", listIDs(t, app, admin, engine.ListRequest{Session: "s2"}), b1)
	wantIDs(t, "the admin naming bob", listIDs(t, app, admin, engine.ListRequest{AllSessions: true, Principal: "bob"}), b1)
	wantIDs(t, "the admin naming alice in s2", listIDs(t, app, admin, engine.ListRequest{Session: "s2", Principal: "alice"}))

	// A tenant never widens its view.
	_, err := app.List(t.Context(), bob, engine.ListRequest{AllSessions: true, Principal: "alice"})
	if !errors.Is(err, engine.ErrPrincipalForbidden) || store.CodeOf(err) != store.CodeForbidden {
		t.Fatalf("bob listing alice's records: %v, want FORBIDDEN", err)
	}
}

func TestListFiltersStatusAndTool(t *testing.T) {
	app := newApp(t)
	ctx := t.Context()
	run := seeded(t, app, "alice", "", "run", "a", engine.DefaultNodeID)
	done := seeded(t, app, "alice", "", "done", "b", engine.DefaultNodeID)
	fp, _ := store.Fingerprint("b", nil, nil)
	if _, err := app.Store().Complete(ctx, store.Key{Principal: "alice", RequestID: "done"}, fp,
		store.Result{ExecutionID: done, Status: store.StatusCompleted, Data: []byte(`1`), FinishedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	st := func(ss ...store.Status) []store.Status { return ss }
	wantIDs(t, "running", listIDs(t, app, alice, engine.ListRequest{Statuses: st(store.StatusRunning)}), run)
	wantIDs(t, "completed or running", listIDs(t, app, alice, engine.ListRequest{Statuses: st(store.StatusCompleted, store.StatusRunning)}), done, run)
	wantIDs(t, "tool b", listIDs(t, app, alice, engine.ListRequest{Tool: "b"}), done)
	wantIDs(t, "tool b running", listIDs(t, app, alice, engine.ListRequest{Tool: "b", Statuses: st(store.StatusRunning)}))

	_, err := app.List(ctx, alice, engine.ListRequest{Statuses: st(store.StatusRunning, "done")})
	wantField(t, err, "status")
	_, err = app.List(ctx, alice, engine.ListRequest{Session: "bad session"})
	wantField(t, err, "session_id")
}

// TestListAttention lists the executions that need a person: interrupted
// ones, and running ones whose runner is gone as Resolve judges it (the
// cluster's Liveness for another node's; this node's own runs are live).
func TestListAttention(t *testing.T) {
	app := newApp(t)
	b := newGoneNodes()
	app.IdempotencyStore(b)
	ctx := t.Context()
	dead := seeded(t, app, "alice", "", "dead", "t", "node9")
	alive := seeded(t, app, "alice", "", "alive", "t", "node8")
	seeded(t, app, "alice", "", "mine", "t", engine.DefaultNodeID)
	lost := seeded(t, app, "alice", "", "lost", "t", "node7")
	if n, err := app.Store().MarkInterrupted(ctx, "node7"); err != nil || n != 1 {
		t.Fatalf("MarkInterrupted = %d, %v", n, err)
	}
	all := engine.ListRequest{AllSessions: true, Attention: true}

	// Without a cluster no other node's runner is known to be gone.
	wantIDs(t, "attention without liveness", listIDs(t, app, alice, all), lost)

	b.declare("node9")
	wantIDs(t, "attention", listIDs(t, app, alice, all), lost, dead)
	run := all
	run.Statuses = []store.Status{store.StatusRunning}
	wantIDs(t, "attention and running", listIDs(t, app, alice, run), dead)
	paged := all
	paged.Limit = 1
	page, err := app.List(ctx, alice, paged)
	if err != nil || len(page.Records) != 1 || page.Records[0].ExecutionID != lost || page.Next == 0 {
		t.Fatalf("first page of one = %+v, %v", page, err)
	}
	paged.Before = page.Next
	wantIDs(t, "second page of one", listIDs(t, app, alice, paged), dead)

	// The same test as Resolve: the record it lists is resolvable, the
	// live one is not.
	if _, err := app.Resolve(ctx, alice, alive, engine.Resolution{Status: engine.ResolutionReleased}); !errors.Is(err, store.ErrInvalidState) {
		t.Fatalf("release of a live node's execution: %v, want INVALID_STATE", err)
	}
	if _, err := app.Resolve(ctx, alice, dead, engine.Resolution{Status: engine.ResolutionReleased}); err != nil {
		t.Fatalf("release of a listed execution: %v", err)
	}
	wantIDs(t, "attention once released", listIDs(t, app, alice, all), lost)
}

// failingNodes is a backend whose RunningNodes fails.
type failingNodes struct{ *store.Memory }

func (failingNodes) RunningNodes(context.Context) ([]string, error) { return nil, store.ErrUnavailable }

func TestListAttentionStoreFailure(t *testing.T) {
	app := newApp(t)
	app.IdempotencyStore(failingNodes{store.NewMemory(10)})
	_, err := app.List(t.Context(), alice, engine.ListRequest{Attention: true})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("List with a failing store: %v, want UNAVAILABLE", err)
	}
}

// TestListToolOutsideAllowList: a caller restricted to some tools that
// filters by another lists nothing, as it would after dropping them.
func TestListToolOutsideAllowList(t *testing.T) {
	app := newApp(t)
	seeded(t, app, "alice", "", "a", "a", engine.DefaultNodeID)
	b := seeded(t, app, "alice", "", "b", "b", engine.DefaultNodeID)
	restricted := engine.Caller{Principal: "alice", Tools: engine.NewToolSet("b")}
	wantIDs(t, "a tool outside the allow-list", listIDs(t, app, restricted, engine.ListRequest{Tool: "a"}))
	wantIDs(t, "a tool inside it", listIDs(t, app, restricted, engine.ListRequest{Tool: "b"}), b)
	wantIDs(t, "no tool", listIDs(t, app, restricted, engine.ListRequest{}), b)
}
