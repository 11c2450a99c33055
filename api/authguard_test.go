package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/mcp"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/metrics/prom"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// guardServer serves authConfig with the given limit on failures, logging
// to logs; close closes the server and then api.Server.
func guardServer(t *testing.T, failures api.AuthFailures, logs io.Writer) (srv *httptest.Server, calls *last[engine.Caller], closeAll func()) {
	t.Helper()
	calls = new(last[engine.Caller])
	cfg := authConfig()
	cfg.AuthFailures = failures
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	cfg.Auth.MetricsToken = metricsToken
	cfg.Pprof = true
	cfg.Metrics = prom.New(nil)
	cfg.MCP = mcp.Endpoint
	s, err := api.New(&fakeRuntime{tb: t,
		call: func(_ context.Context, caller engine.Caller, _ engine.Request) (engine.Response, error) {
			calls.set(caller)
			return engine.Response{Record: completedRecord()}, nil
		},
		tools: func() []engine.ToolInfo { return allTools },
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(s)
	closeAll = func() { srv.Close(); s.Close() }
	t.Cleanup(closeAll)
	return srv, calls, closeAll
}

const metricsToken = "tok-metrics-0123456789"

// fromAddr returns a client whose connections come from the loopback
// address ip (127.0.0.0/8 is all loopback on Linux).
func fromAddr(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// doFrom sends a request with the given Authorization headers (none when
// empty) from client and reads the answer.
func doFrom(t *testing.T, client *http.Client, method, url, body string, authorization ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if len(authorization) > 0 {
		req.Header["Authorization"] = authorization
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: raw}
}

// logLines returns the "authentication failed" lines of logs.
func logLines(logs string) []string {
	var out []string
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, `msg="authentication failed"`) {
			out = append(out, line)
		}
	}
	return out
}

// logged returns the integer value of key in a text log line.
func logged(t *testing.T, line, key string) int {
	t.Helper()
	m := regexp.MustCompile(`\b` + key + `=(\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s in %q", key, line)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestAuthFailuresLimitedPerAddress checks issue 14 finding 6 in process:
// after PerMinute failed authentications from one address, its requests
// are 429 RATE_LIMITED with Retry-After unless their token is valid
// (TestAuthFailuresAdmitValidTokens), without the runtime seeing them;
// requests without a token are not failures; another
// address is not limited; the failures are logged at WARN, once per
// interval with a count, never with a token.
func TestAuthFailuresLimitedPerAddress(t *testing.T) {
	logs := &testutil.SyncBuffer{}
	srv, calls, closeAll := guardServer(t, api.AuthFailures{PerMinute: 3, LogEvery: time.Hour}, logs)
	one, two := fromAddr("127.0.0.1"), fromAddr("127.0.0.2")
	call := srv.URL + callPath

	// No token: 401, no guess, not counted.
	for range 5 {
		wantError(t, doFrom(t, one, http.MethodPost, call, `{"tool":"echo"}`), http.StatusUnauthorized, store.CodeUnauthorized)
	}
	// Three failures: an unknown token, a Basic credential, another token.
	guesses := []string{"Bearer guess-number-one", "Basic c2VjcmV0LWd1ZXNz", "Bearer guess-number-three"}
	for _, g := range guesses {
		wantError(t, doFrom(t, one, http.MethodPost, call, `{"tool":"echo"}`, g), http.StatusUnauthorized, store.CodeUnauthorized)
	}
	// Then a wrong token from the address is refused, on every route that
	// needs a token.
	for _, r := range []struct{ method, path, body string }{
		{http.MethodPost, callPath, `{"tool":"echo"}`},
		{http.MethodGet, "/v1/tools", ""},
		{http.MethodGet, "/metrics", ""},
	} {
		a := doFrom(t, one, r.method, srv.URL+r.path, r.body, "Bearer guess-number-four")
		e := wantError(t, a, http.StatusTooManyRequests, store.CodeRateLimited)
		if e["source"] != "127.0.0.1" {
			t.Errorf("%s: source = %v, want 127.0.0.1", r.path, e["source"])
		}
		if secs, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || secs < 1 || secs > 20 {
			t.Errorf("%s: Retry-After = %q, want the 20 s (or less) until the next attempt", r.path, a.header.Get("Retry-After"))
		}
	}
	if _, n := calls.get(); n != 0 {
		t.Fatalf("the runtime saw %d calls from a limited address", n)
	}
	// Routes without a token are not concerned.
	wantJSON(t, doFrom(t, one, http.MethodGet, srv.URL+"/healthz", ""), http.StatusOK)
	// Another address is not limited.
	wantJSON(t, doFrom(t, two, http.MethodPost, call, `{"tool":"echo"}`, "Bearer "+plannerToken), http.StatusOK)

	// One line at the first failure; the rest is counted until the next
	// line, which closing the server writes.
	lines := logLines(logs.String())
	if len(lines) != 1 || logged(t, lines[0], "failures") != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "source=127.0.0.1") {
		t.Fatalf("log lines after the first failures:\n%s", strings.Join(lines, "\n"))
	}
	closeAll()
	lines = logLines(logs.String())
	if len(lines) != 2 || logged(t, lines[1], "failures") != 2 || logged(t, lines[1], "rate_limited") != 3 {
		t.Fatalf("log lines after close, want a second with 2 failures and 3 refusals:\n%s", strings.Join(lines, "\n"))
	}
	for _, secret := range append(guesses, "c2VjcmV0LWd1ZXNz", "guess-number") {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs.String())
		}
	}
}

// TestAuthFailuresAdmitValidTokens checks issue 39 item 4.1: the limit
// on failed authentications is on failures only. From an address over it
// (a console page with a stale token polling from the operator's
// machine), a valid token — a principal's, the admin's, the metrics
// token — is served on every route, /mcp included, while a wrong one, a
// credential that is not a bearer token and no token at all are still
// 429 RATE_LIMITED with Retry-After, and never reach the runtime.
func TestAuthFailuresAdmitValidTokens(t *testing.T) {
	srv, calls, _ := guardServer(t, api.AuthFailures{PerMinute: 2, LogEvery: time.Hour}, io.Discard)
	one := fromAddr("127.0.0.1")
	call := srv.URL + callPath
	for range 2 {
		wantError(t, doFrom(t, one, http.MethodGet, srv.URL+"/v1/tools", "", "Bearer stale-token-of-a-page"), http.StatusUnauthorized, store.CodeUnauthorized)
	}
	for _, auth := range []string{"Bearer stale-token-of-a-page", "Basic c2VjcmV0LWd1ZXNz", ""} {
		var headers []string
		if auth != "" {
			headers = []string{auth}
		}
		a := doFrom(t, one, http.MethodPost, call, `{"tool":"echo"}`, headers...)
		if wantError(t, a, http.StatusTooManyRequests, store.CodeRateLimited); a.header.Get("Retry-After") == "" {
			t.Errorf("%q from the limited address: no Retry-After", auth)
		}
		if status, _, body := mcpFrom(t, one, srv.URL, headers...); status != http.StatusTooManyRequests || rpcErrorCode(body) != store.CodeRateLimited {
			t.Errorf("%q at /mcp from the limited address: %d %v, want 429 RATE_LIMITED", auth, status, body)
		}
	}
	if _, n := calls.get(); n != 0 {
		t.Fatalf("the runtime saw %d calls with wrong tokens", n)
	}

	wantJSON(t, doFrom(t, one, http.MethodPost, call, `{"tool":"echo"}`, "Bearer "+plannerToken), http.StatusOK)
	if c, n := calls.get(); n != 1 || c.Principal != "planner" {
		t.Fatalf("the planner's call from the limited address: %d calls, caller %+v", n, c)
	}
	wantJSON(t, doFrom(t, one, http.MethodGet, srv.URL+"/v1/tools", "", "Bearer "+plannerToken), http.StatusOK)
	wantJSON(t, doFrom(t, one, http.MethodGet, srv.URL+"/v1/activity", "", "Bearer "+adminToken), http.StatusOK)
	for _, token := range []string{metricsToken, adminToken} {
		if a := doFrom(t, one, http.MethodGet, srv.URL+"/metrics", "", "Bearer "+token); a.status != http.StatusOK {
			t.Errorf("/metrics from the limited address: %d %s", a.status, a.body)
		}
	}
	wantError(t, doFrom(t, one, http.MethodGet, srv.URL+"/metrics", "", "Bearer "+plannerToken), http.StatusForbidden, store.CodeForbidden)
	if status, _, body := mcpFrom(t, one, srv.URL, "Bearer "+plannerToken); status != http.StatusOK || body["error"] != nil {
		t.Errorf("the planner at /mcp from the limited address: %d %v", status, body)
	}
	// Valid tokens left the address over its limit.
	wantError(t, doFrom(t, one, http.MethodGet, srv.URL+"/v1/tools", "", "Bearer stale-token-of-a-page"), http.StatusTooManyRequests, store.CodeRateLimited)
}

// TestAuthFailuresLoggedOncePerInterval checks the log's bound: lines of
// one address at least LogEvery apart, and every failure counted in one.
func TestAuthFailuresLoggedOncePerInterval(t *testing.T) {
	const every = 300 * time.Millisecond
	logs := &testutil.SyncBuffer{}
	srv, _, _ := guardServer(t, api.AuthFailures{PerMinute: -1, LogEvery: every}, logs)
	const n = 25
	for i := range n {
		wantError(t, doFrom(t, http.DefaultClient, http.MethodGet, srv.URL+"/v1/tools", "", "Bearer wrong-"+strconv.Itoa(i)), http.StatusUnauthorized, store.CodeUnauthorized)
	}
	var lines []string
	testutil.Until(t, 10*time.Second, "every failure to be logged", func() bool {
		lines = logLines(logs.String())
		sum := 0
		for _, l := range lines {
			sum += logged(t, l, "failures")
		}
		return sum == n
	})
	for i, l := range lines[1:] {
		since := regexp.MustCompile(`since_last_line=(\S+)`).FindStringSubmatch(l)
		d, err := time.ParseDuration(since[1])
		if err != nil || d < every {
			t.Errorf("line %d came %v after the one before, want at least %v: %s", i+1, since[1], every, l)
		}
	}
}

// TestTwoAuthorizationHeaders checks that two Authorization headers are
// 400 INVALID_REQUEST naming the header, even when both hold the right
// token, and are not counted as failures.
func TestTwoAuthorizationHeaders(t *testing.T) {
	srv, calls, _ := guardServer(t, api.AuthFailures{PerMinute: 1, LogEvery: time.Hour}, io.Discard)
	for _, pair := range [][]string{
		{"Bearer " + plannerToken, "Bearer " + plannerToken},
		{"Bearer " + plannerToken, "Bearer " + adminToken},
		{"Bearer nope", "Bearer " + plannerToken},
	} {
		a := doFrom(t, http.DefaultClient, http.MethodPost, srv.URL+callPath, `{"tool":"echo"}`, pair...)
		wantField(t, a, "Authorization")
	}
	if _, n := calls.get(); n != 0 {
		t.Fatalf("the runtime saw %d calls with two Authorization headers", n)
	}
	wantJSON(t, doFrom(t, http.DefaultClient, http.MethodPost, srv.URL+callPath, `{"tool":"echo"}`, "Bearer "+plannerToken), http.StatusOK)
}

// TestMetricsToken checks /metrics behind Auth.MetricsToken: it or the
// admin token reads it; a principal's token is 403, none or another 401;
// the metrics token opens nothing else.
func TestMetricsToken(t *testing.T) {
	srv, _, _ := guardServer(t, api.AuthFailures{PerMinute: -1}, io.Discard)
	for _, tc := range []struct {
		token  string
		status int
		code   string
	}{
		{metricsToken, http.StatusOK, ""},
		{adminToken, http.StatusOK, ""},
		{plannerToken, http.StatusForbidden, store.CodeForbidden},
		{"tok-unknown-0123456789", http.StatusUnauthorized, store.CodeUnauthorized},
		{"", http.StatusUnauthorized, store.CodeUnauthorized},
	} {
		var auth []string
		if tc.token != "" {
			auth = []string{"Bearer " + tc.token}
		}
		a := doFrom(t, http.DefaultClient, http.MethodGet, srv.URL+"/metrics", "", auth...)
		if tc.status == http.StatusOK {
			if a.status != http.StatusOK || !strings.Contains(string(a.body), "carmy_auth_failures_total") {
				t.Errorf("GET /metrics with %q: %d %.200s", tc.token, a.status, a.body)
			}
			continue
		}
		wantError(t, a, tc.status, tc.code)
	}
	wantError(t, doFrom(t, http.DefaultClient, http.MethodGet, srv.URL+"/v1/tools", "", "Bearer "+metricsToken), http.StatusUnauthorized, store.CodeUnauthorized)
	wantError(t, doFrom(t, http.DefaultClient, http.MethodGet, srv.URL+"/debug/pprof/", "", "Bearer "+metricsToken), http.StatusUnauthorized, store.CodeUnauthorized)

	// With auth off, the metrics token still guards /metrics.
	open := newTestServer(t, &fakeRuntime{tb: t}, api.Config{Auth: api.Auth{MetricsToken: metricsToken}})
	wantError(t, get(t, open, "/metrics"), http.StatusUnauthorized, store.CodeUnauthorized)
	if a := get(t, open, "/metrics", "Authorization", "Bearer "+metricsToken); a.status != http.StatusOK {
		t.Errorf("GET /metrics with the metrics token, auth off: %d", a.status)
	}
	wantJSON(t, get(t, open, "/v1/tools"), http.StatusOK)
}

// mcpFrom posts a JSON-RPC tools/call to /mcp from client with the given
// Authorization headers, as an MCP client sends it.
func mcpFrom(t *testing.T, client *http.Client, url string, authorization ...string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if len(authorization) > 0 {
		req.Header["Authorization"] = authorization
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("POST /mcp answered %d with a body that is not JSON: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, resp.Header, body
}

// rpcErrorCode returns the error code (docs/errors.md) a JSON-RPC error carries in its
// data ("" for none).
func rpcErrorCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	code, _ := data["code"].(string)
	return code
}

// TestMCPAuthGate: /mcp counts failed authentications with the API's
// limiter — an unknown bearer token and a Basic credential are failures,
// no token is not — and, once the address is over its limit, answers 429
// RATE_LIMITED with Retry-After as a JSON-RPC error to a wrong token (the
// right one is served: TestAuthFailuresAdmitValidTokens); two
// Authorization headers are 400 there too.
func TestMCPAuthGate(t *testing.T) {
	srv, calls, _ := guardServer(t, api.AuthFailures{PerMinute: 2, LogEvery: time.Hour}, io.Discard)
	one := fromAddr("127.0.0.1")
	for range 3 {
		if status, _, _ := mcpFrom(t, one, srv.URL); status != http.StatusUnauthorized {
			t.Fatalf("no token: %d, want 401", status)
		}
	}
	for _, g := range []string{"Bearer guess-number-one", "Basic c2VjcmV0LWd1ZXNz"} {
		if status, _, _ := mcpFrom(t, one, srv.URL, g); status != http.StatusUnauthorized {
			t.Fatalf("%s: %d, want 401", g, status)
		}
	}
	status, hdr, body := mcpFrom(t, one, srv.URL, "Bearer guess-number-two")
	if status != http.StatusTooManyRequests || rpcErrorCode(body) != store.CodeRateLimited || hdr.Get("Retry-After") == "" {
		t.Fatalf("a wrong token from a limited address: %d %v %v, want 429 RATE_LIMITED with Retry-After", status, hdr, body)
	}
	two := fromAddr("127.0.0.2")
	status, _, body = mcpFrom(t, two, srv.URL, "Bearer "+plannerToken, "Bearer "+plannerToken)
	if status != http.StatusBadRequest || rpcErrorCode(body) != store.CodeInvalidRequest {
		t.Fatalf("two Authorization headers: %d %v, want 400 INVALID_REQUEST", status, body)
	}
	if _, n := calls.get(); n != 0 {
		t.Fatalf("the runtime saw %d calls", n)
	}
}
