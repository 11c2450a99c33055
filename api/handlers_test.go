package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// callAnswer posts a call to a runtime that answers resp and returns the
// HTTP answer and its decoded body.
func callAnswer(t *testing.T, resp engine.Response) (answer, map[string]any) {
	t.Helper()
	srv := newTestServer(t, &fakeRuntime{tb: t, call: func(context.Context, engine.Caller, engine.Request) (engine.Response, error) {
		return resp, nil
	}}, api.Config{})
	a := post(t, srv, callPath, `{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"order-7f3","session_id":"sess-1"}`)
	return a, wantJSON(t, a, http.StatusOK)
}

// wantMembers checks that m has exactly the members of want (compared as
// JSON values) and no others.
func wantMembers(t *testing.T, m map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		got, ok := m[k]
		if !ok {
			t.Errorf("member %q is missing; body %v", k, m)
			continue
		}
		if !jsonEqual(t, got, v) {
			gs, _ := json.Marshal(got)
			ws, _ := json.Marshal(v)
			t.Errorf("member %q = %s, want %s", k, gs, ws)
		}
	}
	for k := range m {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected member %q = %v", k, m[k])
		}
	}
}

func TestCallAnswer(t *testing.T) {
	t.Run("completed", func(t *testing.T) {
		a, m := callAnswer(t, engine.Response{Record: completedRecord()})
		wantMembers(t, m, map[string]any{
			"execution_id": "exec_01JDTEST", "request_id": "order-7f3", "session_id": "sess-1",
			"tool": "create_order", "status": "completed", "data": map[string]any{"order_id": 1},
			"replayed": false, "started_at": startedText, "finished_at": finishedText,
		})
		if h := a.header.Get("Idempotent-Replayed"); h != "" {
			t.Errorf("Idempotent-Replayed = %q on a fresh execution", h)
		}
	})
	t.Run("replay", func(t *testing.T) {
		a, m := callAnswer(t, engine.Response{Record: completedRecord(), Replayed: true})
		if m["replayed"] != true {
			t.Errorf("replayed = %v, want true", m["replayed"])
		}
		if h := a.header.Get("Idempotent-Replayed"); h != "true" {
			t.Errorf("Idempotent-Replayed = %q, want true", h)
		}
		if m["started_at"] != startedText || m["finished_at"] != finishedText {
			t.Errorf("a replay must keep the recorded times: %v, %v", m["started_at"], m["finished_at"])
		}
	})
	t.Run("failed", func(t *testing.T) {
		rec := completedRecord()
		rec.Status, rec.Data = store.StatusFailed, nil
		rec.Error = json.RawMessage(`{"code":"TOOL_ERROR","message":"out of stock"}`)
		_, m := callAnswer(t, engine.Response{Record: rec})
		wantMembers(t, m, map[string]any{
			"execution_id": "exec_01JDTEST", "request_id": "order-7f3", "session_id": "sess-1",
			"tool": "create_order", "status": "failed",
			"error":    map[string]any{"code": "TOOL_ERROR", "message": "out of stock"},
			"replayed": false, "started_at": startedText, "finished_at": finishedText,
		})
	})
	for _, st := range []store.Status{store.StatusTimedOut, store.StatusCancelled} {
		t.Run(string(st), func(t *testing.T) {
			rec := completedRecord()
			rec.Status, rec.Data = st, nil
			rec.Error = json.RawMessage(`{"code":"X","message":"m"}`)
			_, m := callAnswer(t, engine.Response{Record: rec})
			if _, ok := m["data"]; ok {
				t.Errorf("a %s answer has data: %v", st, m)
			}
			if e, _ := m["error"].(map[string]any); e["code"] != "X" {
				t.Errorf("error = %v", m["error"])
			}
		})
	}
	t.Run("completed with nil data", func(t *testing.T) {
		rec := completedRecord()
		rec.Data = nil
		a, m := callAnswer(t, engine.Response{Record: rec})
		if v, ok := m["data"]; !ok || v != nil {
			t.Errorf(`data = %v (present %v), want null; body %s`, v, ok, a.body)
		}
	})
	t.Run("completed with scalar data", func(t *testing.T) {
		rec := completedRecord()
		rec.Data = json.RawMessage(`"<b>&</b>"`)
		_, m := callAnswer(t, engine.Response{Record: rec})
		if m["data"] != "<b>&</b>" {
			t.Errorf("data = %v", m["data"])
		}
	})
	t.Run("resolved replay", func(t *testing.T) {
		rec := completedRecord()
		rec.Resolved = true
		_, m := callAnswer(t, engine.Response{Record: rec, Replayed: true})
		if m["resolved"] != true || m["replayed"] != true {
			t.Errorf("resolved = %v, replayed = %v; want both true", m["resolved"], m["replayed"])
		}
	})
	t.Run("without request_id", func(t *testing.T) {
		rec := completedRecord()
		rec.Key.RequestID, rec.Key.Session = "", ""
		_, m := callAnswer(t, engine.Response{Record: rec})
		if m["execution_id"] != "exec_01JDTEST" || m["session_id"] != "" {
			t.Errorf("answer = %v", m)
		}
	})
}

func TestHealthAndReadiness(t *testing.T) {
	var notReady last[error]
	srv := newTestServer(t, &fakeRuntime{tb: t, ready: func(ctx context.Context) error {
		if ctx == nil {
			return errors.New("nil context")
		}
		err, _ := notReady.get()
		return err
	}}, api.Config{})

	wantJSON(t, get(t, srv, "/healthz"), http.StatusOK)
	wantJSON(t, get(t, srv, "/readyz"), http.StatusOK)

	notReady.set(errors.New("no leader"))
	a := get(t, srv, "/readyz")
	wantError(t, a, http.StatusServiceUnavailable, store.CodeUnavailable)
	if a.header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
	// Health does not depend on readiness.
	wantJSON(t, get(t, srv, "/healthz"), http.StatusOK)

	notReady.set(nil)
	wantJSON(t, get(t, srv, "/readyz"), http.StatusOK)
}

func TestListTools(t *testing.T) {
	tools := []engine.ToolInfo{
		{Name: "create_order", Description: "Create an order", InputSchema: json.RawMessage(`{"type":"object","required":["sku"]}`), Timeout: 10 * time.Second},
		{Name: "echo", Timeout: 1500 * time.Millisecond},
	}
	srv := newTestServer(t, &fakeRuntime{tb: t, tools: func() []engine.ToolInfo { return tools }}, api.Config{})
	m := wantJSON(t, get(t, srv, "/v1/tools"), http.StatusOK)
	wantMembers(t, m, map[string]any{"tools": []any{
		map[string]any{"name": "create_order", "description": "Create an order",
			"input_schema": map[string]any{"type": "object", "required": []any{"sku"}}, "timeout_ms": 10000},
		map[string]any{"name": "echo", "description": "", "input_schema": map[string]any{"type": "object"}, "timeout_ms": 1500},
	}})

	t.Run("none", func(t *testing.T) {
		srv := newTestServer(t, &fakeRuntime{tb: t}, api.Config{})
		a := get(t, srv, "/v1/tools")
		wantJSON(t, a, http.StatusOK)
		if !strings.Contains(string(a.body), `"tools":[]`) {
			t.Errorf("no tools = %s, want an empty list", a.body)
		}
	})
}

// executionRecord is a record with every field GET /v1/executions shows.
func executionRecord() store.Record {
	rec := completedRecord()
	rec.Resolved = true
	return rec
}

func TestGetExecution(t *testing.T) {
	var ids last[string]
	srv := newTestServer(t, &fakeRuntime{tb: t, execution: func(_ context.Context, _ engine.Caller, id string) (store.Record, error) {
		ids.set(id)
		if id == "exec_running" {
			rec := completedRecord()
			rec.ExecutionID, rec.Status, rec.Data, rec.FinishedAt = id, store.StatusRunning, nil, time.Time{}
			return rec, nil
		}
		return executionRecord(), nil
	}}, api.Config{})

	m := wantJSON(t, get(t, srv, "/v1/executions/exec_01JDTEST"), http.StatusOK)
	if id := ids.mustGet(t); id != "exec_01JDTEST" {
		t.Errorf("Execution got id %q", id)
	}
	wantMembers(t, m, map[string]any{
		"execution_id": "exec_01JDTEST", "request_id": "order-7f3", "session_id": "sess-1",
		"tool": "create_order", "status": "completed", "data": map[string]any{"order_id": 1},
		"started_at": startedText, "finished_at": finishedText,
		"fingerprint": strings.Repeat("ab", 32), "node_id": "node1", "resolved": true, "principal": "anonymous",
	})

	m = wantJSON(t, get(t, srv, "/v1/executions/exec_running"), http.StatusOK)
	if m["status"] != "running" || m["resolved"] != false {
		t.Errorf("running record = %v", m)
	}
	for _, k := range []string{"finished_at", "data", "error", "replayed"} {
		if _, ok := m[k]; ok {
			t.Errorf("a running record shows %q: %v", k, m)
		}
	}
}

func TestLookupExecution(t *testing.T) {
	type lookupArgs struct{ session, requestID string }
	var seen last[lookupArgs]
	srv := newTestServer(t, &fakeRuntime{tb: t, lookup: func(_ context.Context, _ engine.Caller, session, requestID string) (store.Record, error) {
		seen.set(lookupArgs{session, requestID})
		return executionRecord(), nil
	}}, api.Config{})
	for _, tc := range []struct {
		query string
		want  lookupArgs
	}{
		{"?request_id=r&session_id=s", lookupArgs{"s", "r"}},
		{"?session_id=s&request_id=r", lookupArgs{"s", "r"}},
		{"?request_id=order-7f3", lookupArgs{"", "order-7f3"}},
		{"?request_id=a%2Fb&session_id=sess%201", lookupArgs{"sess 1", "a/b"}},
		// The runtime checks request_id; the api passes it on.
		{"?request_id=", lookupArgs{"", ""}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			m := wantJSON(t, get(t, srv, "/v1/executions"+tc.query), http.StatusOK)
			if got := seen.mustGet(t); got != tc.want {
				t.Errorf("Lookup(%+v), want %+v", got, tc.want)
			}
			if m["execution_id"] != "exec_01JDTEST" || m["fingerprint"] == nil {
				t.Errorf("answer is not the record: %v", m)
			}
		})
	}
}

func TestListExecutions(t *testing.T) {
	type listArgs struct {
		session string
		limit   int
		before  uint64
		all     bool
	}
	var seen last[listArgs]
	page := store.Page{Next: 5}
	for _, id := range []string{"exec_b", "exec_a"} {
		rec := executionRecord()
		rec.ExecutionID = id
		page.Records = append(page.Records, rec)
	}
	srv := newTestServer(t, &fakeRuntime{tb: t, list: func(_ context.Context, _ engine.Caller, req engine.ListRequest) (store.Page, error) {
		seen.set(listArgs{req.Session, req.Limit, req.Before, req.AllSessions})
		if req.Session == "empty" {
			return store.Page{}, nil
		}
		return page, nil
	}}, api.Config{})

	m := wantJSON(t, get(t, srv, "/v1/executions?session_id=s&limit=2&cursor=17"), http.StatusOK)
	if got := seen.mustGet(t); got != (listArgs{"s", 2, 17, false}) {
		t.Errorf("List(%+v), want {s 2 17}", got)
	}
	if m["next_cursor"] != "5" {
		t.Errorf("next_cursor = %v, want \"5\"", m["next_cursor"])
	}
	execs, _ := m["executions"].([]any)
	if len(execs) != 2 {
		t.Fatalf("executions = %v, want 2", m["executions"])
	}
	for i, want := range []string{"exec_b", "exec_a"} {
		e, _ := execs[i].(map[string]any)
		if e["execution_id"] != want || e["fingerprint"] == nil || e["node_id"] != "node1" {
			t.Errorf("executions[%d] = %v, want %s with fingerprint and node_id", i, e, want)
		}
	}

	wantJSON(t, get(t, srv, "/v1/executions"), http.StatusOK)
	// Without auth the caller is an admin: no session_id is every session.
	if got := seen.mustGet(t); got != (listArgs{"", 0, 0, true}) {
		t.Errorf("List(%+v), want the defaults {\"\" 0 0 true}", got)
	}
	wantJSON(t, get(t, srv, "/v1/executions?limit=500"), http.StatusOK)
	if got := seen.mustGet(t); got.limit != 500 {
		t.Errorf("limit = %d, want 500", got.limit)
	}

	a := get(t, srv, "/v1/executions?session_id=empty")
	m = wantJSON(t, a, http.StatusOK)
	if _, ok := m["next_cursor"]; ok || !strings.Contains(string(a.body), `"executions":[]`) {
		t.Errorf("empty page = %s, want an empty list and no next_cursor", a.body)
	}
}

func TestListExecutionsRefusesBadQueries(t *testing.T) {
	srv := newTestServer(t, &fakeRuntime{tb: t}, api.Config{})
	for _, tc := range []struct{ query, field string }{
		{"limit=0", "limit"},
		{"limit=501", "limit"},
		{"limit=x", "limit"},
		{"limit=-1", "limit"},
		{"limit=", "limit"},
		{"limit=1.5", "limit"},
		{"cursor=abc", "cursor"},
		{"cursor=0", "cursor"},
		{"cursor=-1", "cursor"},
		{"cursor=", "cursor"},
		{"cursor=18446744073709551616", "cursor"},
		{"requestId=r", "requestId"},
		{"session=s", "session"},
		{"session_id=s&pretty", "pretty"},
		{"request_id=r&limit=2", "request_id"},
		{"request_id=r&cursor=2", "request_id"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			wantField(t, get(t, srv, "/v1/executions?"+tc.query), tc.field)
		})
	}
}

func TestCancelExecution(t *testing.T) {
	var ids last[string]
	srv := newTestServer(t, &fakeRuntime{tb: t, cancel: func(_ context.Context, _ engine.Caller, id string) (store.Record, error) {
		ids.set(id)
		rec := executionRecord()
		rec.ExecutionID, rec.Status, rec.Data = id, store.StatusCancelled, nil
		rec.Error = json.RawMessage(`{"code":"CANCELLED","message":"cancelled by anonymous"}`)
		return rec, nil
	}}, api.Config{})
	for _, tc := range []struct{ name, body, contentType string }{
		{"empty body", ``, "application/json"},
		{"empty body, no Content-Type", ``, ""},
		{"empty object", `{}`, "application/json"},
		{"empty object, no Content-Type", ` {} `, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, before := ids.get()
			a := send(t, srv, request{method: http.MethodPost, path: "/v1/executions/exec_9/cancel",
				body: strings.NewReader(tc.body), header: map[string]string{"Content-Type": tc.contentType}})
			m := wantJSON(t, a, http.StatusOK)
			if id, n := ids.get(); id != "exec_9" || n != before+1 {
				t.Errorf("Cancel(%q) called %d times", id, n-before)
			}
			if m["status"] != "cancelled" || m["execution_id"] != "exec_9" {
				t.Errorf("answer = %v", m)
			}
		})
	}

	refusing := newTestServer(t, &fakeRuntime{tb: t}, api.Config{})
	wantField(t, post(t, refusing, "/v1/executions/exec_9/cancel", `{"x":1}`), "x")
	wantError(t, post(t, refusing, "/v1/executions/exec_9/cancel", `{`), http.StatusBadRequest, store.CodeInvalidRequest)
	wantError(t, post(t, refusing, "/v1/executions/exec_9/cancel", `[]`), http.StatusBadRequest, store.CodeInvalidRequest)
	wantError(t, post(t, refusing, "/v1/executions/exec_9/cancel", `{}`, "Content-Type", "text/plain"),
		http.StatusUnsupportedMediaType, store.CodeUnsupportedMediaType)
	big := `{"pad":"` + strings.Repeat("x", api.DefaultBodyLimit) + `"}`
	wantError(t, post(t, refusing, "/v1/executions/exec_9/cancel", big), http.StatusRequestEntityTooLarge, store.CodePayloadTooLarge)
}

func TestResolveExecution(t *testing.T) {
	type resolveArgs struct {
		id  string
		res engine.Resolution
	}
	var seen last[resolveArgs]
	srv := newTestServer(t, &fakeRuntime{tb: t, resolve: func(_ context.Context, _ engine.Caller, id string, res engine.Resolution) (store.Record, error) {
		seen.set(resolveArgs{id, res})
		rec := executionRecord()
		rec.ExecutionID = id
		switch res.Status {
		case "failed":
			rec.Status, rec.Data, rec.Error = store.StatusFailed, nil, res.Error
		case "released":
			rec.Status, rec.Data, rec.Resolved, rec.FinishedAt = store.StatusInterrupted, nil, false, time.Time{}
		default:
			rec.Data = res.Data
		}
		return rec, nil
	}}, api.Config{})

	for _, tc := range []struct {
		name, body string
		want       engine.Resolution
	}{
		{"completed", `{"status":"completed","data":{"order_id":1}}`, engine.Resolution{Status: "completed", Data: []byte(`{"order_id":1}`)}},
		{"completed with null data", `{"status":"completed","data":null}`, engine.Resolution{Status: "completed", Data: []byte(`null`)}},
		{"completed without data", `{"status":"completed"}`, engine.Resolution{Status: "completed"}},
		{"failed", `{"status":"failed","error":{"code":"TOOL_ERROR","message":"no"}}`,
			engine.Resolution{Status: "failed", Error: []byte(`{"code":"TOOL_ERROR","message":"no"}`)}},
		{"failed with null error", `{"status":"failed","error":null}`, engine.Resolution{Status: "failed"}},
		{"released", `{"status":"released"}`, engine.Resolution{Status: "released"}},
		// The runtime checks the status value; the api passes it on.
		{"other status", `{"status":"running"}`, engine.Resolution{Status: "running"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := wantJSON(t, post(t, srv, "/v1/executions/exec_4/resolve", tc.body), http.StatusOK)
			got := seen.mustGet(t)
			if got.id != "exec_4" || got.res.Status != tc.want.Status ||
				string(got.res.Data) != string(tc.want.Data) || string(got.res.Error) != string(tc.want.Error) {
				t.Errorf("Resolve(%q, %+v), want exec_4, %+v", got.id, got.res, tc.want)
			}
			if released := m["released"] == true; released != (tc.want.Status == "released") {
				t.Errorf("released = %v for status %q", m["released"], tc.want.Status)
			}
			if m["execution_id"] != "exec_4" {
				t.Errorf("answer = %v", m)
			}
			if tc.want.Status == "completed" && m["resolved"] != true {
				t.Errorf("resolved = %v, want true", m["resolved"])
			}
		})
	}

	refusing := newTestServer(t, &fakeRuntime{tb: t}, api.Config{})
	for _, tc := range []struct{ name, body, field string }{
		{"empty body", ``, ""},
		{"missing status", `{}`, "status"},
		{"missing status with data", `{"data":1}`, "status"},
		{"null status", `{"status":null}`, "status"},
		{"status as number", `{"status":1}`, "status"},
		{"unknown field", `{"status":"released","reason":"x"}`, "reason"},
		{"repeated status", `{"status":"released","status":"completed"}`, "status"},
		{"case variant", `{"Status":"released"}`, "Status"},
		{"malformed", `{"status":`, ""},
		{"trailing data", `{"status":"released"} {}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, refusing, "/v1/executions/exec_4/resolve", tc.body)
			e := wantError(t, a, http.StatusBadRequest, store.CodeInvalidRequest)
			if tc.field != "" && e["field"] != tc.field {
				t.Errorf("error.field = %v, want %q", e["field"], tc.field)
			}
		})
	}
	wantError(t, post(t, refusing, "/v1/executions/exec_4/resolve", `{"status":"released"}`, "Content-Type", "text/plain"),
		http.StatusUnsupportedMediaType, store.CodeUnsupportedMediaType)
}
