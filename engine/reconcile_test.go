package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// leftRunning reserves an identity in the app's store as a previous process
// of node would have: running, with nobody running it now.
func leftRunning(t *testing.T, app *engine.Runtime, node, requestID, tool string) store.Record {
	t.Helper()
	fp, err := store.Fingerprint(tool, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	res, err := app.Store().Reserve(t.Context(), store.Key{Principal: "alice", RequestID: requestID}, fp,
		store.Execution{ID: engine.NewExecutionID(now), Tool: tool, NodeID: node, StartedAt: now})
	if err != nil || res.Outcome != store.Reserved {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	return res.Record
}

func TestRestartMarksOwnExecutionsInterrupted(t *testing.T) {
	app := newApp(t)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})
	mine := leftRunning(t, app, engine.DefaultNodeID, "mine", "count")
	theirs := leftRunning(t, app, "node9", "theirs", "count")
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := app.Call(t.Context(), alice, engine.Request{Tool: "count", RequestID: "mine"})
	var ue *store.UncertainError
	if !errors.As(err, &ue) || ue.Record.Status != store.StatusInterrupted || ue.Record.ExecutionID != mine.ExecutionID {
		t.Fatalf("call of an interrupted identity: %v", err)
	}
	if rec, _ := app.Store().Get(t.Context(), theirs.ExecutionID); rec.Status != store.StatusRunning {
		t.Fatalf("another node's execution became %s", rec.Status)
	}
	if c.runs.Load() != 0 {
		t.Fatal("the tool ran for an interrupted identity")
	}
}

func TestResolveInterrupted(t *testing.T) {
	app := newApp(t)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})
	done := leftRunning(t, app, engine.DefaultNodeID, "done", "count")
	failed := leftRunning(t, app, engine.DefaultNodeID, "failed", "count")
	released := leftRunning(t, app, engine.DefaultNodeID, "released", "count")
	if err := app.Start(t.Context()); err != nil {
		t.Fatal(err)
	}

	rec, err := app.Resolve(t.Context(), alice, done.ExecutionID, engine.Resolution{Status: "completed", Data: json.RawMessage(`{"order_id":7}`)})
	if err != nil || rec.Status != store.StatusCompleted || !rec.Resolved {
		t.Fatalf("resolve completed = %+v, %v", rec, err)
	}
	resp := call(t, app, engine.Request{Tool: "count", RequestID: "done"})
	if !resp.Replayed || !resp.Record.Resolved || string(resp.Record.Data) != `{"order_id":7}` {
		t.Fatalf("call after resolve = %+v", resp)
	}
	_, err = app.Resolve(t.Context(), alice, done.ExecutionID, engine.Resolution{Status: "completed", Data: json.RawMessage(`1`)})
	wantErrIs(t, err, store.ErrInvalidState)

	rec, err = app.Resolve(t.Context(), alice, failed.ExecutionID, engine.Resolution{Status: "failed", Error: json.RawMessage(`{"code":"GONE","message":"never arrived"}`)})
	if err != nil || rec.Status != store.StatusFailed || rec.ErrorCode() != "GONE" {
		t.Fatalf("resolve failed = %+v, %v", rec, err)
	}

	if _, err := app.Resolve(t.Context(), alice, released.ExecutionID, engine.Resolution{Status: "released"}); err != nil {
		t.Fatalf("release: %v", err)
	}
	resp = call(t, app, engine.Request{Tool: "count", RequestID: "released"})
	if resp.Replayed || resp.Record.ExecutionID == released.ExecutionID || c.runs.Load() != 1 {
		t.Fatalf("call after release = %+v (runs %d), want a new execution", resp, c.runs.Load())
	}
}

func TestResolveRunning(t *testing.T) {
	app := newApp(t)
	b := newGoneNodes()
	app.IdempotencyStore(b)
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "gate", Func: g.fn})
	go app.Call(context.Background(), alice, engine.Request{Tool: "gate", RequestID: "live"})
	live := <-g.started
	res := engine.Resolution{Status: "completed", Data: json.RawMessage(`1`)}

	// Its runner is alive here: not resolvable.
	_, err := app.Resolve(t.Context(), alice, live, res)
	wantErrIs(t, err, store.ErrInvalidState)

	// Left running by this node's previous process: the runner is gone.
	orphan := leftRunning(t, app, engine.DefaultNodeID, "orphan", "gate")
	if rec, err := app.Resolve(t.Context(), alice, orphan.ExecutionID, res); err != nil || !rec.Resolved {
		t.Fatalf("resolve of an orphan = %+v, %v", rec, err)
	}

	// Running on another node: only when the cluster says it is gone.
	remote := leftRunning(t, app, "node9", "remote", "gate")
	_, err = app.Resolve(t.Context(), alice, remote.ExecutionID, res)
	wantErrIs(t, err, store.ErrInvalidState)
	b.declare("node9")
	if _, err := app.Resolve(t.Context(), alice, remote.ExecutionID, engine.Resolution{Status: "released"}); err != nil {
		t.Fatalf("release of a dead node's execution: %v", err)
	}
	close(g.release)
}

// goneNodes is an in-memory backend whose liveness the test sets: the
// runners of the nodes it declared are gone.
type goneNodes struct {
	*store.Memory
	gone sync.Map // node id → true
}

func newGoneNodes() *goneNodes { return &goneNodes{Memory: store.NewMemory(store.DefaultCapacity)} }

// declare marks node's runner gone.
func (g *goneNodes) declare(node string) { g.gone.Store(node, true) }

func (g *goneNodes) RunnerGone(node string) bool {
	_, ok := g.gone.Load(node)
	return ok
}

func TestResolveRejectsMalformedOutcomes(t *testing.T) {
	app := newApp(t)
	mustAdd(t, app, engine.ToolSpec{Name: "t", Func: (&counter{}).fn})
	rec := leftRunning(t, app, engine.DefaultNodeID, "r", "t")
	bad := []struct {
		res   engine.Resolution
		field string
	}{
		{engine.Resolution{Status: "done"}, "status"},
		{engine.Resolution{Status: "completed"}, "data"},
		{engine.Resolution{Status: "completed", Data: json.RawMessage(`1`), Error: json.RawMessage(`{"code":"X"}`)}, "error"},
		{engine.Resolution{Status: "failed"}, "error"},
		{engine.Resolution{Status: "failed", Error: json.RawMessage(`{"message":"no code"}`)}, "error"},
		{engine.Resolution{Status: "failed", Error: json.RawMessage(`{"code":"X"}`), Data: json.RawMessage(`1`)}, "data"},
		{engine.Resolution{Status: "released", Data: json.RawMessage(`1`)}, "status"},
		{engine.Resolution{Status: "timed_out"}, "status"},
	}
	for _, b := range bad {
		_, err := app.Resolve(t.Context(), alice, rec.ExecutionID, b.res)
		wantField(t, err, b.field)
	}
	if got, _ := app.Store().Get(t.Context(), rec.ExecutionID); got.Status != store.StatusRunning {
		t.Fatalf("malformed resolutions changed the record to %s", got.Status)
	}
}

func TestCancelRunningExecution(t *testing.T) {
	app := newApp(t)
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "gate", Func: g.fn})
	req := engine.Request{Tool: "gate", RequestID: "c1"}
	answer := make(chan engine.Response, 1)
	go func() {
		resp, _ := app.Call(context.Background(), alice, req)
		answer <- resp
	}()
	id := <-g.started
	rec, err := app.Cancel(t.Context(), alice, id)
	if err != nil || rec.Status != store.StatusCancelled {
		t.Fatalf("Cancel = %+v, %v", rec, err)
	}
	if err := <-g.sawCtx; !errors.Is(err, context.Canceled) {
		t.Fatalf("the tool saw %v, want its context cancelled", err)
	}
	first := <-answer
	mustStatus(t, first.Record, store.StatusCancelled)
	if code, _ := errorCode(t, first.Record); code != "CANCELLED" {
		t.Fatalf("code = %s", code)
	}
	if again := call(t, app, req); !again.Replayed || again.Record.Status != store.StatusCancelled {
		t.Fatalf("retry after cancel = %+v", again)
	}
	_, err = app.Cancel(t.Context(), alice, id)
	wantErrIs(t, err, store.ErrInvalidState)
	if g.runs.Load() != 1 {
		t.Fatalf("tool ran %d times", g.runs.Load())
	}
}

func TestPrincipalsSeeOnlyTheirOwn(t *testing.T) {
	app := newApp(t)
	mustAdd(t, app, engine.ToolSpec{Name: "t", Func: (&counter{}).fn})
	rec := leftRunning(t, app, engine.DefaultNodeID, "mine", "t")
	bob := engine.Caller{Principal: "bob"}
	admin := engine.Caller{Principal: "root", Admin: true}
	ctx := t.Context()

	if _, err := app.Execution(ctx, bob, rec.ExecutionID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob read alice's execution: %v", err)
	}
	if _, err := app.Cancel(ctx, bob, rec.ExecutionID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob cancelled alice's execution: %v", err)
	}
	if _, err := app.Resolve(ctx, bob, rec.ExecutionID, engine.Resolution{Status: "released"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob released alice's execution: %v", err)
	}
	if _, err := app.Lookup(ctx, bob, "", "mine"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob looked up alice's identity: %v", err)
	}
	if page, err := app.List(ctx, bob, engine.ListRequest{}); err != nil || len(page.Records) != 0 {
		t.Fatalf("bob listed %d of alice's records, %v", len(page.Records), err)
	}
	if _, err := app.Execution(ctx, admin, rec.ExecutionID); err != nil {
		t.Fatalf("admin cannot read: %v", err)
	}
	if page, err := app.List(ctx, admin, engine.ListRequest{}); err != nil || len(page.Records) != 1 {
		t.Fatalf("admin listed %d records, %v", len(page.Records), err)
	}
	if got, err := app.Lookup(ctx, alice, "", "mine"); err != nil || got.ExecutionID != rec.ExecutionID {
		t.Fatalf("alice's lookup = %+v, %v", got, err)
	}
	_, err := app.Lookup(ctx, alice, "", "")
	wantField(t, err, "request_id")
	_, err = app.List(ctx, alice, engine.ListRequest{Limit: store.MaxListLimit + 1})
	wantField(t, err, "limit")
}

func TestShutdownCancelsToolsPastTheDrain(t *testing.T) {
	app := engine.New(engine.WithLogger(quietLogger()), engine.WithDrainTimeout(50*time.Millisecond))
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "gate", Func: g.fn})
	answer := make(chan engine.Response, 1)
	go func() {
		resp, _ := app.Call(context.Background(), alice, engine.Request{Tool: "gate", RequestID: "s1"})
		answer <- resp
	}()
	<-g.started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	rec := (<-answer).Record
	mustStatus(t, rec, store.StatusCancelled)
	if _, msg := errorCode(t, rec); !strings.Contains(msg, "shutting down") {
		t.Fatalf("message %q does not say why", msg)
	}
	_, err := app.Call(t.Context(), alice, engine.Request{Tool: "gate", RequestID: "s2"})
	wantErrIs(t, err, engine.ErrClosed)
	if err := app.Ready(t.Context()); err == nil {
		t.Fatal("a closed runtime says it is ready")
	}
}

func TestReleaseWhileRunningTellsTheRunnersCaller(t *testing.T) {
	app := newApp(t)
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "gate", Func: g.fn})
	errc := make(chan error, 1)
	go func() {
		_, err := app.Call(context.Background(), alice, engine.Request{Tool: "gate", RequestID: "rel"})
		errc <- err
	}()
	id := <-g.started
	// As if this node had been declared dead while its tool still ran.
	if _, err := app.Store().MarkInterrupted(t.Context(), engine.DefaultNodeID); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Resolve(t.Context(), alice, id, engine.Resolution{Status: "released"}); err != nil {
		t.Fatalf("release: %v", err)
	}
	close(g.release)
	err := <-errc
	wantErrIs(t, err, store.ErrInvalidState)
	var f interface{ Fields() map[string]any }
	if !errors.As(err, &f) || f.Fields()["status"] != "released" || f.Fields()["execution_id"] != id {
		t.Fatalf("err = %v, want INVALID_STATE naming the released execution", err)
	}
	if _, err := app.Lookup(t.Context(), alice, "", "rel"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the late outcome was recorded after the release: %v", err)
	}
}

// TestReleasedThenRetakenTellsTheRunnersCaller checks the caller of an
// execution released while its tool ran, when the identity was taken by a
// new execution before the first tool finished: with the same arguments or
// with others, the caller gets INVALID_STATE naming its own released
// execution, never the new execution's record, and the new one is intact.
func TestReleasedThenRetakenTellsTheRunnersCaller(t *testing.T) {
	for _, sameArgs := range []bool{true, false} {
		t.Run(fmt.Sprintf("same arguments %v", sameArgs), func(t *testing.T) {
			app := newApp(t)
			// Each execution waits for its own release.
			var mu sync.Mutex
			gates := map[string]chan struct{}{}
			gateOf := func(id string) chan struct{} {
				mu.Lock()
				defer mu.Unlock()
				if gates[id] == nil {
					gates[id] = make(chan struct{})
				}
				return gates[id]
			}
			started := make(chan string, 2)
			mustAdd(t, app, engine.ToolSpec{Name: "gate", Func: func(ctx context.Context, call engine.Call) (any, error) {
				g := gateOf(call.ExecutionID)
				started <- call.ExecutionID
				select {
				case <-g:
					return "done", nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}})
			errc := make(chan error, 1)
			go func() {
				_, err := app.Call(context.Background(), alice, engine.Request{Tool: "gate", RequestID: "retaken", Arguments: json.RawMessage(`{"n":1}`)})
				errc <- err
			}()
			first := <-started
			if _, err := app.Store().MarkInterrupted(t.Context(), engine.DefaultNodeID); err != nil {
				t.Fatal(err)
			}
			if _, err := app.Resolve(t.Context(), alice, first, engine.Resolution{Status: "released"}); err != nil {
				t.Fatalf("release: %v", err)
			}
			args := `{"n":1}`
			if !sameArgs {
				args = `{"n":2}`
			}
			second := make(chan engine.Response, 1)
			go func() {
				resp, err := app.Call(context.Background(), alice, engine.Request{Tool: "gate", RequestID: "retaken", Arguments: json.RawMessage(args)})
				if err != nil {
					t.Errorf("the second call: %v", err)
				}
				second <- resp
			}()
			secondID := <-started
			// The first tool finishes while the second runs; then the second.
			close(gateOf(first))
			err := <-errc
			wantErrIs(t, err, store.ErrInvalidState)
			var f interface{ Fields() map[string]any }
			if !errors.As(err, &f) || f.Fields()["status"] != "released" || f.Fields()["execution_id"] != first {
				t.Fatalf("err = %v, want INVALID_STATE naming the released execution %s", err, first)
			}
			close(gateOf(secondID))
			if resp := <-second; resp.Record.ExecutionID != secondID || resp.Record.Status != store.StatusCompleted {
				t.Fatalf("the second call answered %+v, want its own completed execution %s", resp.Record, secondID)
			}
		})
	}
}
