package mcpgateway_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// An HTTP upstream that restarts forgets its sessions, and answers a
// request on one of them 404 without running anything (the MCP Streamable
// HTTP transport). A call the node sends on its old session before it
// noticed is therefore never sent, not uncertain: it runs once on a new
// session, and no execution is left interrupted.

// TestHTTPUpstreamRestartRunsTheCall: the upstream comes back at once, so
// the call runs on a new session within the same attempt.
func TestHTTPUpstreamRestartRunsTheCall(t *testing.T) {
	f := newFakeUpstream(t)
	rt := newRuntime(t)
	startUpstream(t, rt, httpConfig(f))
	waitTool(t, rt, "tickets.create")
	if before := mustCall(t, rt, createReq("before")); before.Record.Status != store.StatusCompleted {
		t.Fatalf("the call before the restart: %s %s", before.Record.Status, before.Record.Error)
	}

	f.restart()
	resp, err := rt.Call(t.Context(), alice, createReq("after"))
	if err != nil {
		t.Fatalf("the first call after the upstream restarted: %v; want it run on a new session", err)
	}
	if resp.Record.Status != store.StatusCompleted || string(resp.Record.Data) != `{"order":1,"sku":"KB-01"}` {
		t.Fatalf("the first call after the restart: %s %s %s", resp.Record.Status, resp.Record.Data, resp.Record.Error)
	}
	// The group is unavailable until the new session is listed.
	if again := callWhenAvailable(t, rt, createReq("after")); !again.Replayed {
		t.Errorf("its retry was not replayed: %+v", again.Record)
	}
	if n := f.runsOf("create", "after"); n != 1 {
		t.Errorf("the upstream ran the call %d times, want 1", n)
	}
	noneInterrupted(t, rt, "before", "after")
}

// TestHTTPUpstreamRestartNotBackYet: the restarted upstream does not take
// a new session yet, so the call is answered UNAVAILABLE with nothing
// recorded, and its retry, once the upstream is back, runs it once.
func TestHTTPUpstreamRestartNotBackYet(t *testing.T) {
	t.Parallel()
	f := newFakeUpstream(t)
	rt := newRuntime(t)
	startUpstream(t, rt, httpConfig(f))
	waitTool(t, rt, "tickets.create")
	mustCall(t, rt, createReq("before"))

	f.refuseNew.Store(true)
	f.restart()
	_, err := rt.Call(t.Context(), alice, createReq("after"))
	if store.CodeOf(err) != store.CodeUnavailable || !errors.Is(err, engine.ErrNotSent) {
		t.Fatalf("a call refused on a session the upstream forgot: %v; want UNAVAILABLE, never sent", err)
	}
	if rec, lerr := rt.Store().Lookup(t.Context(), store.Key{Principal: alice.Principal, RequestID: "after"}); !errors.Is(lerr, store.ErrNotFound) {
		t.Fatalf("a call never run left %+v (%v), want nothing", rec, lerr)
	}

	f.refuseNew.Store(false)
	resp := callWhenAvailable(t, rt, createReq("after"))
	if resp.Record.Status != store.StatusCompleted || resp.Replayed {
		t.Fatalf("the retry: %s (replayed %v) %s", resp.Record.Status, resp.Replayed, resp.Record.Error)
	}
	if n := f.runsOf("create", "after"); n != 1 {
		t.Errorf("the upstream ran the call %d times, want 1", n)
	}
	noneInterrupted(t, rt, "before", "after")
}

// TestHTTPUpstreamRestartMidCallIsUncertain: an upstream that restarts
// while a call runs forgets the session too, but it had taken the call
// in: the 404 to the node resuming the call's event stream leaves the
// execution interrupted (the tool may have had its effect), and the call
// is not sent again.
func TestHTTPUpstreamRestartMidCallIsUncertain(t *testing.T) {
	t.Parallel()
	f := newFakeUpstream(t)
	f.resumable.Store(true)
	f.restart() // before any session: the node's is resumable
	t.Cleanup(func() { close(f.release) })
	rt := newRuntime(t)
	startUpstream(t, rt, httpConfig(f))
	waitTool(t, rt, "tickets.block")

	errc := make(chan error, 1)
	go func() {
		_, err := rt.Call(t.Context(), alice, engine.Request{Tool: "tickets.block", RequestID: "mid"})
		errc <- err
	}()
	select {
	case <-f.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not start upstream within 30s")
	}
	f.restart()
	f.CloseClientConnections() // the node resumes the call's stream: 404
	var err error
	select {
	case err = <-errc:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not end within 30s of the restart")
	}
	var ue *store.UncertainError
	if !errors.As(err, &ue) || ue.Record.Status != store.StatusInterrupted {
		t.Fatalf("a call the upstream took in before it restarted: %v; want EXECUTION_UNCERTAIN, interrupted", err)
	}
	if n := f.runsOf("block", "mid"); n != 1 {
		t.Errorf("the upstream ran the call %d times, want 1", n)
	}
}

func createReq(requestID string) engine.Request {
	return engine.Request{Tool: "tickets.create", RequestID: requestID, Arguments: json.RawMessage(`{"sku":"KB-01"}`)}
}

// callWhenAvailable makes the call req, again while it is answered
// UNAVAILABLE (nothing reserved: the upstream is not listed yet), and
// returns its response; another error fails the test.
func callWhenAvailable(t *testing.T, rt *engine.Runtime, req engine.Request) engine.Response {
	t.Helper()
	var resp engine.Response
	wait.For(t, 30*time.Second, "the call "+req.RequestID+" to be taken", func() error {
		var err error
		resp, err = rt.Call(t.Context(), alice, req)
		if store.CodeOf(err) == store.CodeUnavailable {
			return err
		}
		if err != nil {
			t.Fatalf("Call(%s, %q): %v", req.Tool, req.RequestID, err)
		}
		return nil
	})
	return resp
}

// noneInterrupted fails the test if an execution of one of requestIDs
// (alice's) is interrupted.
func noneInterrupted(t *testing.T, rt *engine.Runtime, requestIDs ...string) {
	t.Helper()
	for _, id := range requestIDs {
		rec, err := rt.Store().Lookup(t.Context(), store.Key{Principal: alice.Principal, RequestID: id})
		if err != nil {
			t.Fatalf("the record of %q: %v", id, err)
		}
		if rec.Status == store.StatusInterrupted {
			t.Errorf("the execution of %q is interrupted", id)
		}
	}
}
