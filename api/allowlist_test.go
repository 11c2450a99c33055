package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// TestAllowListReachesExecutions checks that a principal's tool allow-list
// holds wherever a tool's executions can be reached: an execution of a
// tool outside it reads as absent (404, so ids are not probed) to a get,
// a lookup, a cancel and a resolve, and is left out of listings.
func TestAllowListReachesExecutions(t *testing.T) {
	rec := completedRecord() // tool create_order, allowed to planner
	other := rec
	other.ExecutionID, other.Tool = "exec_sleep", "sleep" // not allowed to planner
	byID := map[string]store.Record{rec.ExecutionID: rec, other.ExecutionID: other}
	acted := 0
	rt := &fakeRuntime{tb: t,
		execution: func(_ context.Context, _ engine.Caller, id string) (store.Record, error) {
			if r, ok := byID[id]; ok {
				return r, nil
			}
			return store.Record{}, store.ErrNotFound
		},
		lookup: func(_ context.Context, _ engine.Caller, _, requestID string) (store.Record, error) {
			return byID[requestID], nil
		},
		list: func(context.Context, engine.Caller, string, int, uint64) (store.Page, error) {
			return store.Page{Records: []store.Record{rec, other}}, nil
		},
		cancel: func(context.Context, engine.Caller, string) (store.Record, error) { acted++; return rec, nil },
		resolve: func(context.Context, engine.Caller, string, engine.Resolution) (store.Record, error) {
			acted++
			return rec, nil
		},
	}
	srv := newTestServer(t, rt, authConfig())
	planner := []string{"Authorization", "Bearer " + plannerToken}

	wantError(t, get(t, srv, "/v1/executions/exec_sleep", planner...), http.StatusNotFound, "NOT_FOUND")
	wantError(t, get(t, srv, "/v1/executions?request_id=exec_sleep", planner...), http.StatusNotFound, "NOT_FOUND")
	wantError(t, post(t, srv, "/v1/executions/exec_sleep/cancel", ``, planner...), http.StatusNotFound, "NOT_FOUND")
	wantError(t, post(t, srv, "/v1/executions/exec_sleep/resolve", `{"status":"released"}`, planner...), http.StatusNotFound, "NOT_FOUND")
	if acted != 0 {
		t.Errorf("%d cancels or resolves reached the runtime for a tool outside the allow-list", acted)
	}
	list := wantJSON(t, get(t, srv, "/v1/executions?session_id=sess-1", planner...), http.StatusOK)
	if execs, _ := list["executions"].([]any); len(execs) != 1 {
		t.Errorf("planner lists %d executions, want only the allowed tool's: %v", len(execs), list)
	}
	// The allowed tool's execution is reachable, and a principal allowed
	// every tool reaches both.
	wantJSON(t, get(t, srv, "/v1/executions/"+rec.ExecutionID, planner...), http.StatusOK)
	wantJSON(t, post(t, srv, "/v1/executions/"+rec.ExecutionID+"/cancel", ``, planner...), http.StatusOK)
	wantJSON(t, get(t, srv, "/v1/executions/exec_sleep", "Authorization", "Bearer "+allToken), http.StatusOK)
}
