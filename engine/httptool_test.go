package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

// quietApp returns a runtime that logs nowhere.
func quietApp(t *testing.T) *Runtime {
	t.Helper()
	app := New(WithLogger(slog.New(slog.DiscardHandler)))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := app.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return app
}

// upstreamRequest is what the upstream saw of one request.
type upstreamRequest struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// fakeUpstream is an httptest.Server that records every request before
// handing it to its handler.
type fakeUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []upstreamRequest
}

// newFakeUpstream starts an upstream answering with h. It is closed at
// cleanup; a handler that blocks must also end when its request's context
// does.
func newFakeUpstream(t *testing.T, h http.HandlerFunc) *fakeUpstream {
	t.Helper()
	return startFakeUpstream(t, nil, h)
}

// startFakeUpstream is newFakeUpstream serving on ln (nil: httptest's own
// listener on 127.0.0.1).
func startFakeUpstream(t *testing.T, ln net.Listener, h http.HandlerFunc) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("upstream: reading the body: %v", err)
		}
		u.mu.Lock()
		u.reqs = append(u.reqs, upstreamRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		u.mu.Unlock()
		h(w, r)
	}))
	if ln != nil {
		u.Listener.Close()
		u.Listener = ln
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// requests returns a copy of what the upstream saw so far.
func (u *fakeUpstream) requests() []upstreamRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]upstreamRequest(nil), u.reqs...)
}

// answer returns a handler that always answers status, contentType, body.
func answer(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// mustAddHTTPTool registers an HTTP tool named name on app. A tool
// without a Logger logs nowhere.
func mustAddHTTPTool(t *testing.T, app *Runtime, name string, h HTTPTool, timeout time.Duration) {
	t.Helper()
	if h.Logger == nil {
		h.Logger = slog.New(slog.DiscardHandler)
	}
	fn, err := h.Func()
	if err != nil {
		t.Fatalf("HTTPTool.Func: %v", err)
	}
	if err := app.AddTool(ToolSpec{Name: name, Func: fn, Timeout: timeout}); err != nil {
		t.Fatalf("AddTool: %v", err)
	}
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Errorf("not JSON: %s: %v", a, err)
		return false
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Errorf("not JSON: %s: %v", b, err)
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// recordedError decodes a record's error object.
func recordedError(t *testing.T, rec store.Record) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Error, &m); err != nil {
		t.Fatalf("record error %s: %v", rec.Error, err)
	}
	return m
}

func TestHTTPToolSendsTheCall(t *testing.T) {
	up := newFakeUpstream(t, answer(http.StatusOK, "application/json", `{"order_id": 7, "ok": true}`+"\n"))
	app := quietApp(t)
	mustAddHTTPTool(t, app, "create_order", HTTPTool{URL: up.URL + "/orders", Headers: map[string]string{"Authorization": "Bearer t"}}, 0)

	ctx := t.Context()
	caller := Caller{Principal: "p"}
	req := Request{Tool: "create_order", Arguments: json.RawMessage(`{"sku": "KB-01", "qty": 2}`), RequestID: "r1", SessionID: "s"}
	resp, err := app.Call(ctx, caller, req)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	rec := resp.Record
	if rec.Status != store.StatusCompleted || resp.Replayed {
		t.Fatalf("record = %+v, replayed %v; want completed, not replayed", rec, resp.Replayed)
	}
	if !sameJSON(t, rec.Data, []byte(`{"order_id":7,"ok":true}`)) {
		t.Errorf("data = %s, want the upstream's JSON", rec.Data)
	}

	reqs := up.requests()
	if len(reqs) != 1 {
		t.Fatalf("the upstream got %d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if got.Method != http.MethodPost || got.Path != "/orders" {
		t.Errorf("upstream got %s %s, want POST /orders", got.Method, got.Path)
	}
	if !sameJSON(t, got.Body, req.Arguments) {
		t.Errorf("upstream body = %s, want the arguments %s", got.Body, req.Arguments)
	}
	if rec.Seq == 0 {
		t.Fatalf("record Seq = 0, want a positive fencing token")
	}
	wantHeaders := map[string]string{
		"Content-Type":        "application/json",
		"Authorization":       "Bearer t",
		"Idempotency-Key":     store.Key{Principal: "p", Session: "s", RequestID: "r1"}.IdempotencyKey(),
		"Carmy-Execution-Id":  rec.ExecutionID,
		"Carmy-Request-Id":    "r1",
		"Carmy-Fencing-Token": strconv.FormatUint(rec.Seq, 10),
	}
	for k, want := range wantHeaders {
		if v := got.Header.Get(k); v != want {
			t.Errorf("upstream header %s = %q, want %q", k, v, want)
		}
	}

	// A retry is replayed; the upstream is not called again.
	again, err := app.Call(ctx, caller, req)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !again.Replayed || again.Record.ExecutionID != rec.ExecutionID || string(again.Record.Data) != string(rec.Data) {
		t.Errorf("retry = %+v, want a replay of %s", again, rec.ExecutionID)
	}
	if n := len(up.requests()); n != 1 {
		t.Errorf("the upstream got %d requests after the retry, want 1", n)
	}
}

func TestHTTPToolAnswers(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		wantStatus  store.Status
		wantData    string // JSON, for completed
		wantCode    string // for the others
	}{
		{"json object", 200, "application/json", `{"a":1}`, store.StatusCompleted, `{"a":1}`, ""},
		{"json array", 200, "application/json", ` [1, 2] `, store.StatusCompleted, `[1,2]`, ""},
		{"created", 201, "application/json", `{"id":"x"}`, store.StatusCompleted, `{"id":"x"}`, ""},
		{"text", 200, "text/plain", "hello, world", store.StatusCompleted, `{"body":"hello, world"}`, ""},
		{"html", 200, "text/html", "<p>hi</p>", store.StatusCompleted, `{"body":"<p>hi</p>"}`, ""},
		{"text that parses as JSON", 200, "text/plain", "42", store.StatusCompleted, `{"body":"42"}`, ""},
		{"problem+json", 200, "application/problem+json; charset=utf-8", `{"p":1}`, store.StatusCompleted, `{"p":1}`, ""},
		{"no content", 204, "", "", store.StatusCompleted, `{"body":""}`, ""},
		{"server error", 500, "application/json", `{"error":"down"}`, store.StatusFailed, "", "UPSTREAM_STATUS"},
		{"not found", 404, "text/plain", "nope", store.StatusFailed, "", "UPSTREAM_STATUS"},
		{"conflict", 409, "", "", store.StatusFailed, "", "UPSTREAM_STATUS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newFakeUpstream(t, answer(tt.status, tt.contentType, tt.body))
			app := quietApp(t)
			mustAddHTTPTool(t, app, "tool", HTTPTool{URL: up.URL}, 0)
			resp, err := app.Call(t.Context(), Caller{Principal: "p"}, Request{Tool: "tool", RequestID: "r-" + strings.ReplaceAll(tt.name, " ", "-")})
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			rec := resp.Record
			if rec.Status != tt.wantStatus {
				t.Fatalf("status = %s (error %s), want %s", rec.Status, rec.Error, tt.wantStatus)
			}
			if tt.wantStatus == store.StatusCompleted {
				if !sameJSON(t, rec.Data, []byte(tt.wantData)) {
					t.Errorf("data = %s, want %s", rec.Data, tt.wantData)
				}
				if len(rec.Error) != 0 {
					t.Errorf("a completed record carries error %s", rec.Error)
				}
				return
			}
			e := recordedError(t, rec)
			if e["code"] != tt.wantCode {
				t.Errorf("error code = %v, want %s (error %s)", e["code"], tt.wantCode, rec.Error)
			}
			if e["status"] != float64(tt.status) {
				t.Errorf("error status = %v, want %d (error %s)", e["status"], tt.status, rec.Error)
			}
			if msg, _ := e["message"].(string); !strings.Contains(msg, strconv.Itoa(tt.status)) {
				t.Errorf("error message = %q, want it to give the status", msg)
			}
			if len(rec.Data) != 0 {
				t.Errorf("a failed record carries data %s", rec.Data)
			}
		})
	}
}

func TestHTTPToolFailedAnswerBodyIsBounded(t *testing.T) {
	big := strings.Repeat("é", 4000) // 8000 bytes, multi-byte runes
	up := newFakeUpstream(t, answer(http.StatusBadGateway, "text/plain", big))
	app := quietApp(t)
	mustAddHTTPTool(t, app, "tool", HTTPTool{URL: up.URL}, 0)
	resp, err := app.Call(t.Context(), Caller{Principal: "p"}, Request{Tool: "tool", RequestID: "r1"})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if resp.Record.Status != store.StatusFailed {
		t.Fatalf("status = %s, want failed", resp.Record.Status)
	}
	body, _ := recordedError(t, resp.Record)["body"].(string)
	if body == "" || len(body) > 2*maxErrorBody || !strings.HasPrefix(big, strings.TrimSuffix(body, "…")) {
		t.Errorf("error body has %d bytes, want a valid prefix of the answer of at most about %d", len(body), maxErrorBody)
	}
}

func TestHTTPToolTimeout(t *testing.T) {
	release := make(chan struct{})
	up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the upstream closes
	app := quietApp(t)
	mustAddHTTPTool(t, app, "slow", HTTPTool{URL: up.URL}, 100*time.Millisecond)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := app.Call(ctx, Caller{Principal: "p"}, Request{Tool: "slow", RequestID: "r1"})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if resp.Record.Status != store.StatusTimedOut {
		t.Fatalf("status = %s (error %s), want timed_out", resp.Record.Status, resp.Record.Error)
	}
	if code := resp.Record.ErrorCode(); code != CodeTimeout {
		t.Errorf("error code = %s, want %s", code, CodeTimeout)
	}
	// The timeout is recorded and replayed; the upstream is not called again.
	again, err := app.Call(ctx, Caller{Principal: "p"}, Request{Tool: "slow", RequestID: "r1"})
	if err != nil || !again.Replayed || again.Record.Status != store.StatusTimedOut {
		t.Errorf("retry = %+v, %v; want a replayed timed_out", again, err)
	}
	if n := len(up.requests()); n != 1 {
		t.Errorf("the upstream got %d requests, want 1", n)
	}
}

func TestHTTPToolCallTimeoutLowersToolTimeout(t *testing.T) {
	release := make(chan struct{})
	up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })
	app := quietApp(t)
	mustAddHTTPTool(t, app, "slow", HTTPTool{URL: up.URL}, time.Minute)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := app.Call(ctx, Caller{Principal: "p"}, Request{Tool: "slow", RequestID: "r1", Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if resp.Record.Status != store.StatusTimedOut || resp.Record.ErrorCode() != CodeTimeout {
		t.Errorf("record = %+v (error %s), want timed_out with TIMEOUT", resp.Record, resp.Record.Error)
	}
}

func TestHTTPToolWithoutRequestID(t *testing.T) {
	up := newFakeUpstream(t, answer(http.StatusOK, "application/json", `{}`))
	app := quietApp(t)
	mustAddHTTPTool(t, app, "tool", HTTPTool{URL: up.URL}, 0)
	resp, err := app.Call(t.Context(), Caller{Principal: "p"}, Request{Tool: "tool", Arguments: json.RawMessage(`{"a":1}`)})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if resp.Record.Status != store.StatusCompleted {
		t.Fatalf("status = %s, want completed", resp.Record.Status)
	}
	reqs := up.requests()
	if len(reqs) != 1 {
		t.Fatalf("the upstream got %d requests, want 1", len(reqs))
	}
	h := reqs[0].Header
	for _, k := range []string{"Idempotency-Key", "Carmy-Request-Id", "Carmy-Fencing-Token"} {
		if v, ok := h[k]; ok {
			t.Errorf("a call without request_id sent %s: %q", k, v)
		}
	}
	if got := h.Get("Carmy-Execution-Id"); got != resp.Record.ExecutionID || !strings.HasPrefix(got, "exec_") {
		t.Errorf("Carmy-Execution-Id = %q, want %q", got, resp.Record.ExecutionID)
	}
}

func TestHTTPToolMethodAndHeaders(t *testing.T) {
	up := newFakeUpstream(t, answer(http.StatusOK, "application/json", `{}`))
	app := quietApp(t)
	mustAddHTTPTool(t, app, "put", HTTPTool{
		URL:    up.URL + "/things?x=1",
		Method: http.MethodPut,
		Headers: map[string]string{
			"X-Api-Key": "k",
			// A configured header cannot take the place of Carmy's own.
			"Idempotency-Key":     "mine",
			"Carmy-Fencing-Token": "0",
		},
	}, 0)
	resp, err := app.Call(t.Context(), Caller{Principal: "p"}, Request{Tool: "put", RequestID: "r1"})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	got := up.requests()[0]
	if got.Method != http.MethodPut || got.Path != "/things" {
		t.Errorf("upstream got %s %s, want PUT /things", got.Method, got.Path)
	}
	if string(got.Body) != `{}` {
		t.Errorf("absent arguments were sent as %q, want {}", got.Body)
	}
	if v := got.Header.Get("X-Api-Key"); v != "k" {
		t.Errorf("X-Api-Key = %q, want k", v)
	}
	if v, want := got.Header.Get("Idempotency-Key"), (store.Key{Principal: "p", RequestID: "r1"}).IdempotencyKey(); v != want {
		t.Errorf("Idempotency-Key = %q, want Carmy's %q", v, want)
	}
	if v, want := got.Header.Get("Carmy-Fencing-Token"), strconv.FormatUint(resp.Record.Seq, 10); v != want {
		t.Errorf("Carmy-Fencing-Token = %q, want %q", v, want)
	}
}

func TestHTTPToolFuncRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "ftp://127.0.0.1/x", "127.0.0.1:9000/x", "/x", "http://", "https:///x", "://x"} {
		if _, err := (HTTPTool{URL: u}).Func(); err == nil {
			t.Errorf("HTTPTool{URL: %q}.Func() accepted it", u)
		}
	}
	for _, u := range []string{"http://127.0.0.1:9000/x", "https://example.com", "HTTP://example.com/x"} {
		if _, err := (HTTPTool{URL: u}).Func(); err != nil {
			t.Errorf("HTTPTool{URL: %q}.Func(): %v", u, err)
		}
	}
}

func TestHTTPToolIdempotencyKeySurvivesRelease(t *testing.T) {
	// The first execution reaches the upstream and stays there until the
	// test lets it go; meanwhile it is marked interrupted and released.
	arrived := make(chan struct{})
	release := make(chan struct{})
	var (
		mu    sync.Mutex
		calls int
	)
	up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			close(arrived)
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(letGo)

	app := quietApp(t)
	mustAddHTTPTool(t, app, "write", HTTPTool{URL: up.URL}, 30*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	caller := Caller{Principal: "p"}
	req := Request{Tool: "write", Arguments: json.RawMessage(`{"v":1}`), RequestID: "r2", SessionID: "s"}

	type result struct {
		resp Response
		err  error
	}
	first := make(chan result, 1)
	go func() {
		resp, err := app.Call(ctx, caller, req)
		first <- result{resp, err}
	}()
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("the first execution never reached the upstream")
	}

	rec, err := app.Lookup(ctx, caller, "s", "r2")
	if err != nil || rec.Status != store.StatusRunning {
		t.Fatalf("Lookup = %+v, %v; want running", rec, err)
	}
	n, err := app.Store().MarkInterrupted(ctx, app.Config().NodeID)
	if err != nil || n != 1 {
		t.Fatalf("MarkInterrupted = %d, %v; want 1", n, err)
	}
	_, err = app.Call(ctx, caller, req)
	var ue *store.UncertainError
	if !errors.As(err, &ue) || ue.Record.Status != store.StatusInterrupted {
		t.Fatalf("a retry of an interrupted call = %v, want EXECUTION_UNCERTAIN (interrupted)", err)
	}
	released, err := app.Resolve(ctx, caller, rec.ExecutionID, Resolution{Status: ResolutionReleased})
	if err != nil {
		t.Fatalf("Resolve released: %v", err)
	}
	if released.ExecutionID != rec.ExecutionID {
		t.Errorf("Resolve returned %s, want the released %s", released.ExecutionID, rec.ExecutionID)
	}

	// Let the first runner finish: its result belongs to no reservation any
	// more and must not be recorded.
	letGo()
	select {
	case <-first:
	case <-ctx.Done():
		t.Fatal("the first call did not return after its upstream answered")
	}
	if got, err := app.Lookup(ctx, caller, "s", "r2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after release and the late answer, Lookup = %+v, %v; want not found", got, err)
	}

	second, err := app.Call(ctx, caller, req)
	if err != nil {
		t.Fatalf("the call after release: %v", err)
	}
	if second.Replayed || second.Record.Status != store.StatusCompleted {
		t.Fatalf("the call after release = %+v, want a new completed execution", second)
	}
	if second.Record.ExecutionID == rec.ExecutionID {
		t.Fatalf("the call after release reused execution id %s", rec.ExecutionID)
	}

	reqs := up.requests()
	if len(reqs) != 2 {
		t.Fatalf("the upstream got %d requests, want 2", len(reqs))
	}
	a, b := reqs[0].Header, reqs[1].Header
	wantKey := store.Key{Principal: "p", Session: "s", RequestID: "r2"}.IdempotencyKey()
	if a.Get("Idempotency-Key") != wantKey || b.Get("Idempotency-Key") != wantKey {
		t.Errorf("Idempotency-Key = %q then %q, want %q both times", a.Get("Idempotency-Key"), b.Get("Idempotency-Key"), wantKey)
	}
	if a.Get("Carmy-Execution-Id") != rec.ExecutionID || b.Get("Carmy-Execution-Id") != second.Record.ExecutionID {
		t.Errorf("Carmy-Execution-Id = %q then %q, want %q then %q",
			a.Get("Carmy-Execution-Id"), b.Get("Carmy-Execution-Id"), rec.ExecutionID, second.Record.ExecutionID)
	}
	fa, errA := strconv.ParseUint(a.Get("Carmy-Fencing-Token"), 10, 64)
	fb, errB := strconv.ParseUint(b.Get("Carmy-Fencing-Token"), 10, 64)
	if errA != nil || errB != nil || fa != rec.Seq || fb != second.Record.Seq || fb <= fa {
		t.Errorf("Carmy-Fencing-Token = %q then %q (records %d, %d), want growing decimals equal to the records' Seq",
			a.Get("Carmy-Fencing-Token"), b.Get("Carmy-Fencing-Token"), rec.Seq, second.Record.Seq)
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 5, "abcde…"},
		{"ééé", 3, "é…"}, // never cuts a rune in two
		{"", 0, ""},
	}
	for _, tt := range tests {
		if got := truncate([]byte(tt.in), tt.n); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
