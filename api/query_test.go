package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// TestQueryRefusesWhatNetHTTPDrops checks that a query string net/http
// would read with pairs silently dropped (a ';', which Go no longer takes
// as a separator; a malformed escape) or read one way of two (a repeated
// name) is 400 INVALID_REQUEST naming the parameter, on every route,
// before the runtime sees it: ?request_id=a;b must not turn a lookup into
// a listing.
func TestQueryRefusesWhatNetHTTPDrops(t *testing.T) {
	srv := newTestServer(t, &fakeRuntime{tb: t}, api.Config{})
	for _, tc := range []struct{ path, field string }{
		{"/v1/executions?request_id=a;b", "request_id"},
		{"/v1/executions?session_id=s;request_id=r", "session_id"},
		{"/v1/executions?session_id=s&limit=2;cursor=1", "limit"},
		{"/v1/executions?;", "query"},
		{"/v1/executions?session_id=s&%3B=x;", ";"},
		{"/v1/executions?request_id=%zz", "request_id"},
		{"/v1/executions?request_id%zz=a", "query"},
		{"/v1/executions?request_id=a&request_id=b", "request_id"},
		{"/v1/executions/exec_1?x=1;y=2", "x"},
		{"/v1/tools?a;b", "a"},
		{"/healthz?check;=1", "check"},
		{"/no/such/route?a=1;b=2", "a"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			e := wantField(t, get(t, srv, tc.path), tc.field)
			if msg, _ := e["message"].(string); msg == "" {
				t.Errorf("no message: %v", e)
			}
		})
	}
	// An escaped ';' is data, not a separator; empty pairs are nothing.
	var seen last[string]
	lookup := newTestServer(t, &fakeRuntime{tb: t, lookup: func(_ context.Context, _ engine.Caller, _, requestID string) (store.Record, error) {
		seen.set(requestID)
		return executionRecord(), nil
	}}, api.Config{})
	wantJSON(t, get(t, lookup, "/v1/executions?request_id=a%3Bb&&"), http.StatusOK)
	if got := seen.mustGet(t); got != "a;b" {
		t.Errorf("request_id = %q, want a;b", got)
	}
}
