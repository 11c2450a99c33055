package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// reserveAs reserves an identity of principal for tool in rt's store, as
// a call of another node would have: running, or completed when done.
func reserveAs(t *testing.T, rt *engine.Runtime, principal, requestID, tool string, done bool) store.Record {
	t.Helper()
	fp, err := store.Fingerprint(tool, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	key := store.Key{Principal: principal, Session: "sess-1", RequestID: requestID}
	res, err := rt.Store().Reserve(t.Context(), key, fp,
		store.Execution{ID: engine.NewExecutionID(now), Tool: tool, NodeID: "node9", StartedAt: now})
	if err != nil || res.Outcome != store.Reserved {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	if !done {
		return res.Record
	}
	rec, err := rt.Store().Complete(t.Context(), key, fp, store.Result{
		ExecutionID: res.Record.ExecutionID, Status: store.StatusCompleted, Data: json.RawMessage(`{"order_id":1}`), FinishedAt: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestAllowListReachesExecutions checks that a principal's tool allow-list
// holds wherever a tool's executions can be reached: an execution of a
// tool outside it reads as absent (404, so ids are not probed) to a get,
// a lookup, a cancel and a resolve, which change nothing, and is left out
// of listings. The runtime decides; this is what the client sees.
func TestAllowListReachesExecutions(t *testing.T) {
	rt := newEngine(t, "create_order", "sleep")
	srv := newTestServer(t, rt, authConfig())
	planner := bearer(plannerToken) // create_order and echo, not sleep
	done := reserveAs(t, rt, "planner", "order-7f3", "create_order", true)
	running := reserveAs(t, rt, "planner", "order-8", "create_order", false)
	sleeping := reserveAs(t, rt, "planner", "sleep-1", "sleep", false)

	wantError(t, get(t, srv, "/v1/executions/"+sleeping.ExecutionID, planner...), http.StatusNotFound, "NOT_FOUND")
	wantError(t, get(t, srv, "/v1/executions?session_id=sess-1&request_id=sleep-1", planner...), http.StatusNotFound, "NOT_FOUND")
	wantError(t, post(t, srv, "/v1/executions/"+sleeping.ExecutionID+"/cancel", ``, planner...), http.StatusNotFound, "NOT_FOUND")
	wantError(t, post(t, srv, "/v1/executions/"+sleeping.ExecutionID+"/resolve", `{"status":"released"}`, planner...), http.StatusNotFound, "NOT_FOUND")
	if rec, err := rt.Store().Get(t.Context(), sleeping.ExecutionID); err != nil || rec.Status != store.StatusRunning {
		t.Errorf("a cancel or resolve of a tool outside the allow-list acted: %+v, %v", rec, err)
	}
	list := wantJSON(t, get(t, srv, "/v1/executions?session_id=sess-1", planner...), http.StatusOK)
	if execs, _ := list["executions"].([]any); len(execs) != 2 {
		t.Errorf("planner lists %d executions, want only the allowed tool's 2: %v", len(execs), list)
	}
	// The allowed tool's executions are reachable, and a principal allowed
	// every tool (the admin) reaches the other.
	wantJSON(t, get(t, srv, "/v1/executions/"+done.ExecutionID, planner...), http.StatusOK)
	wantJSON(t, post(t, srv, "/v1/executions/"+running.ExecutionID+"/cancel", ``, planner...), http.StatusOK)
	wantJSON(t, get(t, srv, "/v1/executions/"+sleeping.ExecutionID, bearer(adminToken)...), http.StatusOK)
}
