package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// codedError is an error with an error code of docs/errors.md, as package carmy raises them
// (api tests cannot import carmy, which imports api).
type codedError struct{ code, msg string }

func (e *codedError) Error() string     { return e.msg }
func (e *codedError) ErrorCode() string { return e.code }

func TestUnknownRoutesAndMethods(t *testing.T) {
	srv := newTestServer(t, &fakeRuntime{tb: t}, api.Config{})
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/", http.StatusNotFound, store.CodeNotFound},
		{http.MethodGet, "/nope", http.StatusNotFound, store.CodeNotFound},
		{http.MethodPost, "/v1/tools/call/", http.StatusNotFound, store.CodeNotFound},
		{http.MethodPost, "/v1/tool/call", http.StatusNotFound, store.CodeNotFound},
		{http.MethodGet, "/v1/executions/x/y", http.StatusNotFound, store.CodeNotFound},
		{http.MethodDelete, "/v1/tools/call", http.StatusMethodNotAllowed, store.CodeMethodNotAllowed},
		{http.MethodGet, "/v1/tools/call", http.StatusMethodNotAllowed, store.CodeMethodNotAllowed},
		{http.MethodPut, "/healthz", http.StatusMethodNotAllowed, store.CodeMethodNotAllowed},
		{http.MethodPost, "/readyz", http.StatusMethodNotAllowed, store.CodeMethodNotAllowed},
		{http.MethodPost, "/v1/tools", http.StatusMethodNotAllowed, store.CodeMethodNotAllowed},
		{http.MethodPost, "/v1/executions/exec_1", http.StatusMethodNotAllowed, store.CodeMethodNotAllowed},
		{http.MethodGet, "/v1/executions/exec_1/cancel", http.StatusMethodNotAllowed, store.CodeMethodNotAllowed},
		{http.MethodDelete, "/v1/executions/exec_1/resolve", http.StatusMethodNotAllowed, store.CodeMethodNotAllowed},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			a := send(t, srv, request{method: tc.method, path: tc.path, body: strings.NewReader(`{"tool":"echo"}`)})
			if strings.Contains(strings.ToLower(string(a.body)), "<html") {
				t.Errorf("HTML answer: %s", a.body)
			}
			wantError(t, a, tc.status, tc.code)
			if tc.status == http.StatusMethodNotAllowed && a.header.Get("Allow") == "" {
				t.Errorf("405 without an Allow header")
			}
		})
	}
}

// errorCase is an error the runtime returns and the answer it must give.
type errorCase struct {
	name   string
	err    error
	status int
	code   string
	// extra are members the error object must have.
	extra map[string]any
	// retryAfter says whether the answer carries Retry-After.
	retryAfter bool
}

func runtimeErrorCases() []errorCase {
	running := completedRecord()
	running.Status, running.Data, running.FinishedAt = store.StatusRunning, nil, finished.AddDate(-1, 0, 0)
	interrupted := running
	interrupted.Status = store.StatusInterrupted
	return []errorCase{
		{name: "not found", err: store.ErrNotFound, status: 404, code: "NOT_FOUND"},
		{name: "wrapped not found", err: fmt.Errorf("lookup: %w", store.ErrNotFound), status: 404, code: "NOT_FOUND"},
		{name: "capacity", err: store.ErrCapacity, status: 503, code: "IDEMPOTENCY_CAPACITY", retryAfter: true},
		{name: "unavailable", err: store.ErrUnavailable, status: 503, code: "UNAVAILABLE", retryAfter: true},
		{name: "commit unknown", err: fmt.Errorf("reserve: %w", store.ErrCommitUnknown), status: 503, code: "UNAVAILABLE", retryAfter: true},
		{
			name: "conflict", err: &store.ConflictError{Record: completedRecord()}, status: 409, code: "IDEMPOTENCY_CONFLICT",
			extra: map[string]any{"execution_id": "exec_01JDTEST"},
		},
		{
			name: "uncertain running", err: &store.UncertainError{Record: running}, status: 409, code: "EXECUTION_UNCERTAIN",
			extra: map[string]any{"execution_id": "exec_01JDTEST", "status": "running"}, retryAfter: true,
		},
		{
			name: "uncertain interrupted", err: fmt.Errorf("call: %w", &store.UncertainError{Record: interrupted}), status: 409,
			code: "EXECUTION_UNCERTAIN", extra: map[string]any{"execution_id": "exec_01JDTEST", "status": "interrupted"},
		},
		{
			name: "invalid state", err: &store.StateError{Op: "cancel", Record: completedRecord()}, status: 409, code: "INVALID_STATE",
			extra: map[string]any{"execution_id": "exec_01JDTEST", "status": "completed"},
		},
		{
			name: "field error", err: &store.FieldError{Field: "arguments", Err: errors.New("must be a JSON object")},
			status: 400, code: "INVALID_REQUEST", extra: map[string]any{"field": "arguments"},
		},
		{name: "store invalid", err: fmt.Errorf("%w: bad key", store.ErrInvalid), status: 400, code: "INVALID_REQUEST"},
		{name: "unknown tool", err: &codedError{"UNKNOWN_TOOL", `no tool "nope"`}, status: 404, code: "UNKNOWN_TOOL"},
		{name: "wrapped unknown tool", err: fmt.Errorf("call: %w", &codedError{"UNKNOWN_TOOL", "no tool"}), status: 404, code: "UNKNOWN_TOOL"},
		{name: "forbidden", err: &codedError{"FORBIDDEN", "not yours"}, status: 403, code: "FORBIDDEN"},
		{name: "deadline", err: fmt.Errorf("reserve: %w", context.DeadlineExceeded), status: 503, code: "UNAVAILABLE", retryAfter: true},
		{name: "code unknown to the contract", err: &codedError{"SECRET_CODE", "secret internal detail"}, status: 500, code: "INTERNAL"},
		{name: "plain error", err: errors.New("secret internal detail"), status: 500, code: "INTERNAL"},
		// The api decodes request bodies itself; a JSON error from the
		// runtime is its own fault, not the client's.
		{name: "JSON syntax error", err: fmt.Errorf("reading the record: %w", syntaxError()), status: 500, code: "INTERNAL"},
	}
}

func syntaxError() error {
	var v any
	err := json.Unmarshal([]byte(`{"secret":`), &v)
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		panic(fmt.Sprintf("no *json.SyntaxError: %v", err))
	}
	return err
}

func checkErrorCase(t *testing.T, a answer, tc errorCase) {
	t.Helper()
	e := wantError(t, a, tc.status, tc.code)
	for k, v := range tc.extra {
		if fmt.Sprint(e[k]) != fmt.Sprint(v) {
			t.Errorf("error.%s = %v, want %v; body %s", k, e[k], v, a.body)
		}
	}
	if got := a.header.Get("Retry-After") != ""; got != tc.retryAfter {
		t.Errorf("Retry-After = %q, want present=%v", a.header.Get("Retry-After"), tc.retryAfter)
	}
	if strings.Contains(string(a.body), "secret") {
		t.Errorf("the answer leaks the internal error: %s", a.body)
	}
	if a.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("an error answer has Idempotent-Replayed")
	}
}

func TestRuntimeErrorsOnCall(t *testing.T) {
	for _, tc := range runtimeErrorCases() {
		t.Run(tc.name, func(t *testing.T) {
			srv := newTestServer(t, &fakeRuntime{tb: t, call: func(context.Context, engine.Caller, engine.Request) (engine.Response, error) {
				return engine.Response{Record: completedRecord(), Replayed: true}, tc.err
			}}, api.Config{})
			checkErrorCase(t, post(t, srv, callPath, `{"tool":"create_order","request_id":"order-7f3"}`), tc)
		})
	}
}

// The one mapping serves every endpoint, not only calls.
func TestRuntimeErrorsOnOtherEndpoints(t *testing.T) {
	for _, tc := range runtimeErrorCases() {
		t.Run(tc.name, func(t *testing.T) {
			fail := func(context.Context, engine.Caller, string) (store.Record, error) { return store.Record{}, tc.err }
			srv := newTestServer(t, &fakeRuntime{
				tb: t, execution: fail, cancel: fail,
				lookup: func(context.Context, engine.Caller, string, string) (store.Record, error) {
					return store.Record{}, tc.err
				},
				list: func(context.Context, engine.Caller, engine.ListRequest) (store.Page, error) {
					return store.Page{}, tc.err
				},
				resolve: func(context.Context, engine.Caller, string, engine.Resolution) (store.Record, error) {
					return store.Record{}, tc.err
				},
			}, api.Config{})
			checkErrorCase(t, get(t, srv, "/v1/executions/exec_1"), tc)
			checkErrorCase(t, get(t, srv, "/v1/executions?request_id=r"), tc)
			checkErrorCase(t, get(t, srv, "/v1/executions?session_id=s"), tc)
			checkErrorCase(t, post(t, srv, "/v1/executions/exec_1/cancel", ``), tc)
			checkErrorCase(t, post(t, srv, "/v1/executions/exec_1/resolve", `{"status":"released"}`), tc)
		})
	}
}

func TestRuntimePanicIsInternal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value any
	}{
		{"string", "secret internal detail"},
		{"plain error", errors.New("secret internal detail")},
		// A panic is a bug, whatever it carries: never an answer that
		// claims the tool did not run (UNAVAILABLE) or that it is missing.
		{"coded error", store.ErrUnavailable},
		{"not found", fmt.Errorf("secret: %w", store.ErrNotFound)},
		{"context error", context.Canceled},
		{"nil dereference", nil}, // a real runtime error, see below
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls last[int]
			srv := newTestServer(t, &fakeRuntime{tb: t, call: func(_ context.Context, _ engine.Caller, req engine.Request) (engine.Response, error) {
				_, n := calls.get()
				calls.set(n + 1)
				if req.Tool == "boom" {
					if tc.value == nil {
						var rec *store.Record
						return engine.Response{Record: *rec}, nil
					}
					panic(tc.value)
				}
				return engine.Response{Record: completedRecord()}, nil
			}}, api.Config{})
			for range 3 {
				a := post(t, srv, callPath, `{"tool":"boom"}`)
				wantError(t, a, http.StatusInternalServerError, store.CodeInternal)
				if strings.Contains(string(a.body), "secret") || strings.Contains(string(a.body), "goroutine") {
					t.Errorf("the answer leaks the panic: %s", a.body)
				}
				// The server keeps serving.
				wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`), http.StatusOK)
			}
			if _, n := calls.get(); n != 6 {
				t.Errorf("the runtime was called %d times, want 6", n)
			}
		})
	}
}

func TestErrorAnswerToHEAD(t *testing.T) {
	srv := newTestServer(t, &fakeRuntime{tb: t}, api.Config{})
	a := send(t, srv, request{method: http.MethodHead, path: "/nope"})
	if a.status != http.StatusNotFound || len(a.body) != 0 {
		t.Errorf("HEAD /nope = %d %q, want 404 without a body", a.status, a.body)
	}
}

func TestErrorType(t *testing.T) {
	cause := errors.New("cause")
	e := &api.Error{Code: store.CodeInvalidRequest, Message: "bad", Extra: map[string]any{"field": "tool"}, Err: cause}
	if got := store.CodeOf(fmt.Errorf("wrapped: %w", e)); got != store.CodeInvalidRequest {
		t.Errorf("CodeOf = %q, want INVALID_REQUEST", got)
	}
	if !errors.Is(e, cause) {
		t.Errorf("errors.Is(e, cause) = false")
	}
	if e.Error() != "bad: cause" || (&api.Error{Message: "bad"}).Error() != "bad" {
		t.Errorf("Error() = %q", e.Error())
	}
	if e.Fields()["field"] != "tool" {
		t.Errorf("Fields() = %v", e.Fields())
	}
}

// A record the runtime got wrong (data that is not JSON) cannot be
// encoded: the answer is still an envelope, never a half-written body.
func TestUnencodableRecordIsInternal(t *testing.T) {
	rec := completedRecord()
	rec.Data = []byte(`{"order_id":`)
	srv := newTestServer(t, &fakeRuntime{tb: t,
		call: func(context.Context, engine.Caller, engine.Request) (engine.Response, error) {
			return engine.Response{Record: rec, Replayed: true}, nil
		},
		execution: func(context.Context, engine.Caller, string) (store.Record, error) { return rec, nil },
	}, api.Config{})
	a := post(t, srv, callPath, `{"tool":"create_order"}`)
	wantError(t, a, http.StatusInternalServerError, store.CodeInternal)
	if h := a.header.Get("Idempotent-Replayed"); h != "" {
		t.Errorf("an error answer has Idempotent-Replayed: %s", h)
	}
	wantError(t, get(t, srv, "/v1/executions/exec_01JDTEST"), http.StatusInternalServerError, store.CodeInternal)
}
