package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// leftRunning reserves an identity of the anonymous principal as a
// previous process of this node would have left it: running, with nobody
// running it. Serve's start marks it interrupted.
func leftRunning(t *testing.T, app *carmy.Runtime, requestID, tool, args string) store.Record {
	t.Helper()
	fp, err := store.Fingerprint(tool, json.RawMessage(args), nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	res, err := app.Store().Reserve(t.Context(), store.Key{Principal: engine.AnonymousPrincipal, RequestID: requestID}, fp,
		store.Execution{ID: carmy.NewExecutionID(now), Tool: tool, NodeID: carmy.DefaultNodeID, StartedAt: now})
	if err != nil || res.Outcome != store.Reserved {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	return res.Record
}

// An interrupted execution is surfaced at once, and Lookup, GetExecution
// and Resolve settle it, against a real node.
func TestInterruptedThenResolved(t *testing.T) {
	app := newNode(t)
	const args = `{"sku":"KB-01"}`
	done := leftRunning(t, app, "int-done", "create_order", args)
	failed := leftRunning(t, app, "int-failed", "create_order", args)
	released := leftRunning(t, app, "int-released", "create_order", args)
	base := "http://" + testutil.Serve(t, app, api.Config{})
	c, cnt := newClient(t, base, client.WithRetry(fastRetry))
	ctx := t.Context()

	_, err := c.Call(ctx, "create_order", json.RawMessage(args), client.RequestID("int-done"))
	if !errors.Is(err, client.ErrInterrupted) || !errors.Is(err, client.ErrUncertain) {
		t.Fatalf("call of an interrupted identity: %v, want ErrInterrupted", err)
	}
	ae := asAPIError(t, err)
	if id, status, ok := ae.Uncertain(); !ok || id != done.ExecutionID || status != client.StatusInterrupted {
		t.Fatalf("Uncertain() = %s, %s, %v; want %s interrupted", id, status, ok, done.ExecutionID)
	}
	if n := cnt.n.Load(); n != 1 {
		t.Fatalf("an interrupted execution was asked %d times, want 1", n)
	}

	exec, err := c.Lookup(ctx, "int-done", "")
	if err != nil || exec.Status != client.StatusInterrupted || exec.ExecutionID != done.ExecutionID ||
		!exec.FinishedAt.IsZero() || exec.Resolved || exec.NodeID != carmy.DefaultNodeID || exec.Fingerprint != done.Fingerprint {
		t.Fatalf("Lookup = %+v, %v", exec, err)
	}
	if got, err := c.GetExecution(ctx, done.ExecutionID); err != nil || !reflect.DeepEqual(got, exec) {
		t.Fatalf("GetExecution = %+v, %v; want %+v", got, err, exec)
	}

	// Completed: replayed from then on, marked resolved.
	exec, err = c.Resolve(ctx, done.ExecutionID, client.Completed(map[string]int{"order_id": 7}))
	if err != nil || exec.Status != client.StatusCompleted || !exec.Resolved || exec.ResolvedBy == "" || string(exec.Data) != `{"order_id":7}` {
		t.Fatalf("Resolve completed = %+v, %v", exec, err)
	}
	res, err := c.Call(ctx, "create_order", json.RawMessage(args), client.RequestID("int-done"))
	if err != nil || !res.Replayed || !res.Resolved || res.ExecutionID != done.ExecutionID || string(res.Data) != `{"order_id":7}` {
		t.Fatalf("call after resolve = %+v, %v", res, err)
	}
	_, err = c.Resolve(ctx, done.ExecutionID, client.Completed(1))
	if !errors.Is(err, client.ErrInvalidState) || asAPIError(t, err).ExecStatus != client.StatusCompleted {
		t.Fatalf("second resolve: %v, want ErrInvalidState with status completed", err)
	}

	// Failed: the error replayed.
	exec, err = c.Resolve(ctx, failed.ExecutionID, client.Failed("GONE", "never arrived"))
	if err != nil || exec.Status != client.StatusFailed || exec.Error == nil || exec.Error.Code != "GONE" {
		t.Fatalf("Resolve failed = %+v, %v", exec, err)
	}
	res, err = c.Call(ctx, "create_order", json.RawMessage(args), client.RequestID("int-failed"))
	var te *client.ToolError
	if err != nil || !res.Replayed || !errors.As(res.Err(), &te) || te.Code != "GONE" || te.Message != "never arrived" {
		t.Fatalf("call after a failed resolution = %+v, %v", res, err)
	}

	// Released: the next call runs the tool.
	exec, err = c.Resolve(ctx, released.ExecutionID, client.Released())
	if err != nil || !exec.Released {
		t.Fatalf("release = %+v, %v", exec, err)
	}
	res, err = c.Call(ctx, "create_order", json.RawMessage(args), client.RequestID("int-released"))
	if err != nil || res.Replayed || res.ExecutionID == released.ExecutionID || !strings.Contains(string(res.Data), `"sku":"KB-01"`) {
		t.Fatalf("call after release = %+v, %v; want the tool run now", res, err)
	}
}

func TestCancelLookupAndList(t *testing.T) {
	base := startNode(t)
	c, _ := newClient(t, base, client.WithRetry(fastRetry))
	ctx := t.Context()

	type outcome struct {
		res *client.Result
		err error
	}
	long := make(chan outcome, 1)
	go func() {
		res, err := c.Call(context.Background(), "sleep", map[string]int{"ms": 30000},
			client.RequestID("long-1"), client.Session("s-cancel"), client.Retry(client.NoRetry))
		long <- outcome{res, err}
	}()
	var running *client.Execution
	testutil.Until(t, 10*time.Second, "the sleep to be running", func() bool {
		e, err := c.Lookup(ctx, "long-1", "s-cancel")
		running = e
		return err == nil && e.Status == client.StatusRunning
	})
	if running.Principal != engine.AnonymousPrincipal || running.Tool != "sleep" || running.SessionID != "s-cancel" ||
		len(running.Fingerprint) != 64 || running.NodeID == "" || !running.FinishedAt.IsZero() {
		t.Fatalf("running record = %+v", running)
	}
	if _, err := c.Lookup(ctx, "long-1", ""); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Lookup in another session: %v, want ErrNotFound", err)
	}
	got, err := c.GetExecution(ctx, running.ExecutionID)
	if err != nil || got.Status != client.StatusRunning || got.ExecutionID != running.ExecutionID {
		t.Fatalf("GetExecution = %+v, %v", got, err)
	}

	cancelled, err := c.Cancel(ctx, running.ExecutionID)
	if err != nil || cancelled.Status != client.StatusCancelled || cancelled.FinishedAt.IsZero() {
		t.Fatalf("Cancel = %+v, %v", cancelled, err)
	}
	select {
	case o := <-long:
		if o.err != nil || o.res.Status != client.StatusCancelled || o.res.Err() == nil {
			t.Fatalf("the cancelled call answered %+v, %v; want status cancelled", o.res, o.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	_, err = c.Cancel(ctx, running.ExecutionID)
	if !errors.Is(err, client.ErrInvalidState) || asAPIError(t, err).ExecStatus != client.StatusCancelled {
		t.Fatalf("second Cancel: %v, want ErrInvalidState, status cancelled", err)
	}
	if _, err := c.GetExecution(ctx, "exec_nosuch"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("GetExecution of an unknown id: %v, want ErrNotFound", err)
	}

	// A listing of the session, paged.
	for i := range 2 {
		if _, err := c.Call(ctx, "echo", map[string]int{"i": i}, client.Session("s-cancel")); err != nil {
			t.Fatal(err)
		}
	}
	var all []client.Execution
	opts := client.ListOptions{Limit: 2}
	for {
		page, err := c.ListExecutions(ctx, "s-cancel", opts)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Executions...)
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	if len(all) != 3 || all[2].ExecutionID != running.ExecutionID || all[0].Tool != "echo" {
		t.Fatalf("listing = %+v, want 2 echoes then the sleep, newest first", all)
	}
}

func TestTools(t *testing.T) {
	base := startNode(t)
	c, _ := newClient(t, base)
	tools, err := c.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]client.Tool{}
	for _, tool := range tools {
		byName[tool.Name] = tool
	}
	for _, name := range []string{"echo", "lookup", "create_order", "sleep", "fail"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("Tools lacks %s: %+v", name, tools)
		}
	}
	sleep := byName["sleep"]
	var schema map[string]any
	if sleep.Timeout != time.Minute || json.Unmarshal(sleep.InputSchema, &schema) != nil || schema["type"] != "object" {
		t.Fatalf("sleep = %+v", sleep)
	}
	if err := c.Ready(t.Context()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
}

// TestListFilters narrows a listing: every session, a tool, statuses, a
// principal, attention; a session with AllSessions is a usage error.
func TestListFilters(t *testing.T) {
	base := startNode(t) // auth off: the caller is the admin
	c, _ := newClient(t, base)
	ctx := t.Context()
	for i, sess := range []string{"", "s1", "s2"} {
		if _, err := c.Call(ctx, "echo", map[string]int{"i": i}, client.Session(sess), client.RequestID(fmt.Sprintf("f-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Call(ctx, "fail", map[string]string{"message": "no"}, client.Session("s2"), client.RequestID("f-fail")); err != nil {
		t.Fatal(err)
	}
	count := func(session string, opts client.ListOptions) int {
		t.Helper()
		page, err := c.ListExecutions(ctx, session, opts)
		if err != nil {
			t.Fatalf("ListExecutions(%q, %+v): %v", session, opts, err)
		}
		return len(page.Executions)
	}
	for _, tc := range []struct {
		name    string
		session string
		opts    client.ListOptions
		want    int
	}{
		{"one session", "s2", client.ListOptions{}, 2},
		{"every session", "", client.ListOptions{AllSessions: true}, 4},
		{"a tool", "", client.ListOptions{AllSessions: true, Tool: "echo"}, 3},
		{"statuses", "", client.ListOptions{AllSessions: true, Statuses: []client.Status{client.StatusFailed, client.StatusRunning}}, 1},
		{"a principal", "", client.ListOptions{AllSessions: true, Principal: engine.AnonymousPrincipal}, 4},
		{"another principal", "", client.ListOptions{AllSessions: true, Principal: "nobody"}, 0},
		{"attention", "", client.ListOptions{AllSessions: true, Attention: true}, 0},
	} {
		if got := count(tc.session, tc.opts); got != tc.want {
			t.Errorf("%s: %d executions, want %d", tc.name, got, tc.want)
		}
	}
	if _, err := c.ListExecutions(ctx, "s1", client.ListOptions{AllSessions: true}); err == nil {
		t.Fatal("a session with AllSessions: no error")
	}
	if _, err := c.ListExecutions(ctx, "", client.ListOptions{Statuses: []client.Status{"bogus"}}); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("an unknown status: %v, want ErrInvalid", err)
	}
}
