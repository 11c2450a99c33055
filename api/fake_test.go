package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/mcp"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/metrics/prom"
	"github.com/carmyhq/carmy/store"
)

// fakeRuntime is an api.Runtime made of function fields. A method whose
// field is nil fails the test (when tb is set) and returns an error, except
// Tools and Ready, which default to no tools and ready.
type fakeRuntime struct {
	// tb, when set, is failed by calls of unset methods. Fuzz targets
	// leave it nil: they must not call *testing.F methods.
	tb testing.TB

	call      func(ctx context.Context, caller engine.Caller, req engine.Request) (engine.Response, error)
	tools     func() []engine.ToolInfo
	execution func(ctx context.Context, caller engine.Caller, id string) (store.Record, error)
	lookup    func(ctx context.Context, caller engine.Caller, session, requestID string) (store.Record, error)
	list      func(ctx context.Context, caller engine.Caller, req engine.ListRequest) (store.Page, error)
	cancel    func(ctx context.Context, caller engine.Caller, id string) (store.Record, error)
	resolve   func(ctx context.Context, caller engine.Caller, id string, res engine.Resolution) (store.Record, error)
	ready     func(ctx context.Context) error
	decide    func(ctx context.Context, caller engine.Caller, id string, kind store.DecisionKind, reason string) (store.Record, error)

	gen atomic.Uint64
}

var _ api.Runtime = (*fakeRuntime)(nil)

// errUnset is what an unset method returns.
var errUnset = errors.New("fake runtime: method not set")

func (f *fakeRuntime) unset(method string) error {
	if f.tb != nil {
		f.tb.Errorf("fake runtime: unexpected call of %s", method)
	}
	return errUnset
}

func (f *fakeRuntime) Call(ctx context.Context, caller engine.Caller, req engine.Request) (engine.Response, error) {
	if f.call == nil {
		return engine.Response{}, f.unset("Call")
	}
	return f.call(ctx, caller, req)
}

func (f *fakeRuntime) Tools() []engine.ToolInfo {
	if f.tools == nil {
		return nil
	}
	return f.tools()
}

// ToolsFor is the tools caller may call, as engine.Runtime's decides.
func (f *fakeRuntime) ToolsFor(caller engine.Caller) []engine.ToolInfo {
	var out []engine.ToolInfo
	for _, t := range f.Tools() {
		if caller.MayCall(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// ToolsGeneration changes at every read: the fake's tools may change
// whenever its function field does.
func (f *fakeRuntime) ToolsGeneration() uint64 { return f.gen.Add(1) }

func (f *fakeRuntime) Execution(ctx context.Context, caller engine.Caller, id string) (store.Record, error) {
	if f.execution == nil {
		return store.Record{}, f.unset("Execution")
	}
	return f.execution(ctx, caller, id)
}

func (f *fakeRuntime) Lookup(ctx context.Context, caller engine.Caller, session, requestID string) (store.Record, error) {
	if f.lookup == nil {
		return store.Record{}, f.unset("Lookup")
	}
	return f.lookup(ctx, caller, session, requestID)
}

func (f *fakeRuntime) List(ctx context.Context, caller engine.Caller, req engine.ListRequest) (store.Page, error) {
	if f.list == nil {
		return store.Page{}, f.unset("List")
	}
	return f.list(ctx, caller, req)
}

func (f *fakeRuntime) Decide(ctx context.Context, caller engine.Caller, id string, kind store.DecisionKind, reason string) (store.Record, error) {
	if f.decide == nil {
		return store.Record{}, f.unset("Decide")
	}
	return f.decide(ctx, caller, id, kind, reason)
}

func (f *fakeRuntime) Cancel(ctx context.Context, caller engine.Caller, id string) (store.Record, error) {
	if f.cancel == nil {
		return store.Record{}, f.unset("Cancel")
	}
	return f.cancel(ctx, caller, id)
}

func (f *fakeRuntime) Resolve(ctx context.Context, caller engine.Caller, id string, res engine.Resolution) (store.Record, error) {
	if f.resolve == nil {
		return store.Record{}, f.unset("Resolve")
	}
	return f.resolve(ctx, caller, id, res)
}

func (f *fakeRuntime) Ready(ctx context.Context) error {
	if f.ready == nil {
		return nil
	}
	return f.ready(ctx)
}

// last keeps what a fake saw last and how often it was called. The server
// calls fakes on its own goroutines, so access is locked.
type last[T any] struct {
	mu sync.Mutex
	v  T
	n  int
}

func (l *last[T]) set(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.v, l.n = v, l.n+1
}

func (l *last[T]) get() (T, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.v, l.n
}

// mustGet returns the last value, failing tb when there was none.
func (l *last[T]) mustGet(tb testing.TB) T {
	tb.Helper()
	v, n := l.get()
	if n == 0 {
		tb.Fatalf("the fake runtime was not called")
	}
	return v
}

// callSeen is a runtime Call that records the caller and request it sees
// and answers with resp.
type callSeen struct {
	caller last[engine.Caller]
	req    last[engine.Request]
}

func (c *callSeen) answer(resp engine.Response) func(context.Context, engine.Caller, engine.Request) (engine.Response, error) {
	return func(_ context.Context, caller engine.Caller, req engine.Request) (engine.Response, error) {
		c.caller.set(caller)
		c.req.set(req)
		return resp, nil
	}
}

// Times as docs/api.md#calling-a-tool-post-v1toolscall shows them; started is given in another zone to check
// that answers are in UTC.
var (
	started  = time.Date(2026, 11, 30, 11, 0, 0, 123_000_000, time.FixedZone("CET", 3600))
	finished = time.Date(2026, 11, 30, 10, 0, 0, 140_456_000, time.UTC)
)

const (
	startedText  = "2026-11-30T10:00:00.123Z"
	finishedText = "2026-11-30T10:00:00.140Z"
)

// completedRecord is a finished record of create_order.
func completedRecord() store.Record {
	return store.Record{
		ExecutionID: "exec_01JDTEST",
		Key:         store.Key{Principal: "anonymous", Session: "sess-1", RequestID: "order-7f3"},
		Tool:        "create_order",
		Fingerprint: strings.Repeat("ab", 32),
		Status:      store.StatusCompleted,
		Data:        json.RawMessage(`{"order_id":1}`),
		NodeID:      "node1",
		StartedAt:   started,
		FinishedAt:  finished,
		Seq:         17,
	}
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// mustNew returns an api.Server for rt, logging to the test's output when
// cfg has no logger and, as a node does, counting into Prometheus metrics
// of its own (prom.New) and serving /mcp (mcp.Endpoint) unless cfg says
// otherwise.
func mustNew(tb testing.TB, rt api.Runtime, cfg api.Config) *api.Server {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(tb)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prom.New(nil)
	}
	if cfg.MCP == nil {
		cfg.MCP = mcp.Endpoint
	}
	s, err := api.New(rt, cfg)
	if err != nil {
		tb.Fatalf("api.New: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// newTestServer serves rt over real HTTP for the test's duration.
func newTestServer(t testing.TB, rt api.Runtime, cfg api.Config) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(mustNew(t, rt, cfg))
	t.Cleanup(srv.Close)
	return srv
}

// newTLSTestServer serves rt over HTTPS (httptest's own certificate) for
// the test's duration.
func newTLSTestServer(t testing.TB, rt api.Runtime, cfg api.Config) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(mustNew(t, rt, cfg))
	t.Cleanup(srv.Close)
	return srv
}

// answer is an HTTP answer read in full.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// request describes one HTTP request of a test.
type request struct {
	method, path string
	body         io.Reader
	// header holds extra headers; a Content-Type of "" removes it.
	header map[string]string
}

// send makes req against srv and reads the answer.
func send(t testing.TB, srv *httptest.Server, req request) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, req.method, srv.URL+req.path, req.body)
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	for k, v := range req.header {
		if v == "" {
			r.Header.Del(k)
			continue
		}
		r.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", req.method, req.path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", req.method, req.path, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: body}
}

// post sends a JSON body with Content-Type application/json and extra
// headers given as name, value pairs.
func post(t testing.TB, srv *httptest.Server, path, body string, kv ...string) answer {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return send(t, srv, request{method: http.MethodPost, path: path, body: strings.NewReader(body), header: h})
}

// get sends a GET with extra headers given as name, value pairs.
func get(t testing.TB, srv *httptest.Server, path string, kv ...string) answer {
	t.Helper()
	h := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return send(t, srv, request{method: http.MethodGet, path: path, header: h})
}

// wantJSON checks that a is JSON with the given status and decodes its body
// into a map.
func wantJSON(t testing.TB, a answer, status int) map[string]any {
	t.Helper()
	if a.status != status {
		t.Fatalf("status = %d, want %d; body %s", a.status, status, a.body)
	}
	mt, _, err := mime.ParseMediaType(a.header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json; body %s", a.header.Get("Content-Type"), a.body)
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		t.Fatalf("the body is not a JSON object (%v): %q", err, a.body)
	}
	return m
}

// wantError checks that a is the envelope of docs/errors.md with status and code,
// and returns the error object.
func wantError(t testing.TB, a answer, status int, code string) map[string]any {
	t.Helper()
	m := wantJSON(t, a, status)
	if len(m) != 1 {
		t.Errorf("envelope has members %v, want only \"error\"; body %s", keys(m), a.body)
	}
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object in %s", a.body)
	}
	if e["code"] != code {
		t.Errorf("error.code = %v, want %s; body %s", e["code"], code, a.body)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("error.message is empty or not a string; body %s", a.body)
	}
	return e
}

// wantField checks an INVALID_REQUEST envelope naming field.
func wantField(t testing.TB, a answer, field string) map[string]any {
	t.Helper()
	e := wantError(t, a, http.StatusBadRequest, store.CodeInvalidRequest)
	if e["field"] != field {
		t.Errorf("error.field = %v, want %q; body %s", e["field"], field, a.body)
	}
	return e
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t testing.TB, a, b any) bool {
	t.Helper()
	norm := func(v any) any {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("marshal %v: %v", v, err)
		}
		var out any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("unmarshal %s: %v", raw, err)
		}
		return out
	}
	x, y := norm(a), norm(b)
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return bytes.Equal(xs, ys)
}
