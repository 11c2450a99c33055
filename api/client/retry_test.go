package client_test

// These tests stand a fake server in for a node, below the client, for
// what a real node does not do on demand: transient failures, proxies and
// broken connections.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api/client"
)

func fakeServer(t *testing.T, answers ...func(http.ResponseWriter, *http.Request)) (*fake, string) {
	t.Helper()
	f := &fake{answers: answers}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

var generatedID = regexp.MustCompile(`^carmy-[0-9a-f]{32}$`)

func TestUnavailableIsRetriedWithTheSameRequestID(t *testing.T) {
	f, base := fakeServer(t,
		envelope(http.StatusServiceUnavailable, client.CodeUnavailable, nil),
		envelope(http.StatusServiceUnavailable, client.CodeUnavailable, nil),
		completed(`{"ok":true}`))
	c, _ := newClient(t, base, client.WithRetry(fastRetry), client.WithToken("tok"), client.WithUserAgent("agent/2"))
	res, err := c.Call(t.Context(), "echo", map[string]bool{"ok": true}, client.Session("s"))
	if err != nil {
		t.Fatal(err)
	}
	if f.count() != 3 || res.Status != client.StatusCompleted || string(res.Data) != `{"ok":true}` {
		t.Fatalf("%d requests, result %+v; want 3 and completed", f.count(), res)
	}
	id, _ := f.bodies[0]["request_id"].(string)
	if !generatedID.MatchString(id) {
		t.Fatalf("generated request_id %q", id)
	}
	for i, b := range f.bodies {
		if b["request_id"] != id || b["tool"] != "echo" || b["session_id"] != "s" {
			t.Fatalf("attempt %d sent %v; want request_id %s like the first", i+1, b, id)
		}
		r := f.requests[i]
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("User-Agent") != "agent/2" ||
			r.Header.Get("Content-Type") != "application/json" || r.URL.Path != "/v1/tools/call" || r.Method != http.MethodPost {
			t.Fatalf("attempt %d: %s %s, headers %v", i+1, r.Method, r.URL, r.Header)
		}
	}
}

// TestUnavailableIsRetriedWithoutRequestID: UNAVAILABLE says the node did
// not run the call, so even a call that cannot be replayed is sent again.
func TestUnavailableIsRetriedWithoutRequestID(t *testing.T) {
	f, base := fakeServer(t, envelope(http.StatusServiceUnavailable, client.CodeUnavailable, nil), completed(`1`))
	c, _ := newClient(t, base, client.WithRetry(fastRetry))
	if _, err := c.Call(t.Context(), "echo", nil, client.NoRequestID()); err != nil || f.count() != 2 {
		t.Fatalf("UNAVAILABLE without request_id: %v after %d requests; want success after 2", err, f.count())
	}
	if _, has := f.bodies[0]["request_id"]; has {
		t.Fatalf("NoRequestID sent a request_id: %v", f.bodies[0])
	}
}

// TestCallRetryOverridesTheClients: a call's Retry option replaces the
// client's policy for that call only.
func TestCallRetryOverridesTheClients(t *testing.T) {
	unavailable := envelope(http.StatusServiceUnavailable, client.CodeUnavailable, nil)
	f, base := fakeServer(t, unavailable, unavailable, completed(`1`))
	c, _ := newClient(t, base, client.WithRetry(fastRetry))
	if _, err := c.Call(t.Context(), "echo", nil, client.Retry(client.NoRetry)); !errors.Is(err, client.ErrUnavailable) || f.count() != 1 {
		t.Fatalf("Retry(NoRetry): %v after %d requests; want UNAVAILABLE after 1", err, f.count())
	}
	if _, err := c.Call(t.Context(), "echo", nil); err != nil || f.count() != 3 {
		t.Fatalf("the client's policy after an override: %v after %d requests in all; want success after 3", err, f.count())
	}

	f, base = fakeServer(t, unavailable, completed(`1`))
	c, _ = newClient(t, base, client.WithRetry(client.NoRetry))
	if _, err := c.Call(t.Context(), "echo", nil, client.Retry(fastRetry)); err != nil || f.count() != 2 {
		t.Fatalf("Retry(fastRetry) on a NoRetry client: %v after %d requests; want success after 2", err, f.count())
	}
	if _, err := c.Call(t.Context(), "echo", nil, client.Retry(client.RetryPolicy{MaxAttempts: -1})); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("a negative MaxAttempts: %v; want a usage error", err)
	}
}

func TestRateLimitedIsRetried(t *testing.T) {
	f, base := fakeServer(t,
		envelope(http.StatusTooManyRequests, client.CodeRateLimited, map[string]any{"principal": "p"}),
		completed(`1`))
	c, _ := newClient(t, base, client.WithRetry(fastRetry))
	if _, err := c.Call(t.Context(), "echo", nil); err != nil || f.count() != 2 {
		t.Fatalf("after RATE_LIMITED: %v, %d requests; want success at the 2nd", err, f.count())
	}
}

// resetConn answers by closing the connection with a TCP reset.
func resetConn(t *testing.T) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		conn.Close()
	}
}

func TestConnectionResetIsRetried(t *testing.T) {
	f, base := fakeServer(t, resetConn(t), resetConn(t), completed(`"after resets"`))
	c, _ := newClient(t, base, client.WithRetry(fastRetry))
	res, err := c.Call(t.Context(), "echo", nil, client.RequestID("reset-1"))
	if err != nil || string(res.Data) != `"after resets"` {
		t.Fatalf("after two resets: %+v, %v", res, err)
	}
	if f.count() != 3 || f.bodies[2]["request_id"] != "reset-1" {
		t.Fatalf("%d requests (%v), want 3 with request_id reset-1", f.count(), f.bodies)
	}

	// Without request_id the call is not idempotent: a reset may follow a
	// run of the tool, so it is not retried.
	f, base = fakeServer(t, resetConn(t), completed(`1`))
	c, _ = newClient(t, base, client.WithRetry(fastRetry))
	_, err = c.Call(t.Context(), "echo", nil, client.NoRequestID())
	if err == nil || f.count() != 1 || asRequestError(t, err).Attempts != 1 {
		t.Fatalf("reset of a call without request_id: %v after %d requests; want an error after 1", err, f.count())
	}
	if _, isAPI := errors.AsType[*client.APIError](err); isAPI {
		t.Fatalf("a reset became an APIError: %v", err)
	}
}

func TestRefusedConnectionIsRetriedEvenWithoutRequestID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: every dial is refused
	c, cnt := newClient(t, "http://"+addr, client.WithRetry(client.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}))
	_, err = c.Call(t.Context(), "echo", nil, client.NoRequestID())
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" || cnt.n.Load() != 3 || asRequestError(t, err).Attempts != 3 {
		t.Fatalf("refused dials: %v after %d requests; want a dial error after 3", err, cnt.n.Load())
	}
}

func TestProxyPagesAreProtocolErrors(t *testing.T) {
	html := func(status int) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
		}
	}
	f, base := fakeServer(t, html(http.StatusBadGateway))
	c, _ := newClient(t, base, client.WithRetry(client.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}))
	_, err := c.Call(t.Context(), "echo", nil)
	var pe *client.ProtocolError
	if !errors.As(err, &pe) || pe.Status != http.StatusBadGateway || pe.ContentType != "text/html" || !strings.Contains(pe.Snippet, "Bad Gateway") {
		t.Fatalf("HTML 502: %v (%#v)", err, pe)
	}
	if msg := err.Error(); !strings.Contains(msg, "502") || !strings.Contains(msg, "not a Carmy error envelope") {
		t.Fatalf("the error does not say what came: %s", msg)
	}
	if f.count() != 3 {
		t.Fatalf("a gateway error was tried %d times, want 3 (retried)", f.count())
	}
	if _, isAPI := errors.AsType[*client.APIError](err); isAPI {
		t.Fatal("a proxy page became an APIError")
	}

	// A gateway's JSON without the envelope's code is a gateway error
	// too: retried.
	f, base = fakeServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, `{"message":"upstream closed"}`)
	}, completed(`1`))
	c, _ = newClient(t, base, client.WithRetry(fastRetry))
	if _, err := c.Call(t.Context(), "echo", nil); err != nil || f.count() != 2 {
		t.Fatalf("JSON 502 without code: %v after %d requests; want success after 2", err, f.count())
	}

	// A call without request_id may have run behind the gateway: not
	// retried.
	f, base = fakeServer(t, html(http.StatusBadGateway), completed(`1`))
	c, _ = newClient(t, base, client.WithRetry(fastRetry))
	if _, err := c.Call(t.Context(), "echo", nil, client.NoRequestID()); !errors.As(err, &pe) || f.count() != 1 {
		t.Fatalf("502 of a call without request_id: %v after %d requests; want a *ProtocolError after 1", err, f.count())
	}

	// A 500 page, JSON that is not the envelope, and a 200 that is not
	// JSON: errors that say so, not retried.
	for name, answer := range map[string]func(http.ResponseWriter, *http.Request){
		"html 500": html(http.StatusInternalServerError),
		"json 418 without code": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, `{"error":"teapot"}`)
		},
		"empty 404": func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) },
		"200 text":  func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") },
		"200 json without execution": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, `{"status":"completed"}`)
		},
	} {
		f, base := fakeServer(t, answer)
		c, _ := newClient(t, base, client.WithRetry(fastRetry))
		_, err := c.Call(t.Context(), "echo", nil)
		if !errors.As(err, &pe) || f.count() != 1 {
			t.Errorf("%s: %v after %d requests; want a *ProtocolError after 1", name, err, f.count())
		}
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	f, base := fakeServer(t,
		envelope(http.StatusServiceUnavailable, client.CodeUnavailable, nil, "Retry-After", "1"),
		completed(`1`))
	c, _ := newClient(t, base, client.WithRetry(client.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Second}))
	if _, err := c.Call(t.Context(), "echo", nil); err != nil {
		t.Fatal(err)
	}
	if f.count() != 2 {
		t.Fatalf("%d requests, want 2", f.count())
	}
	if gap := f.times[1].Sub(f.times[0]); gap < 950*time.Millisecond {
		t.Fatalf("the retry came %s after Retry-After: 1", gap)
	}
}

func TestRetryAfterIsCapped(t *testing.T) {
	f, base := fakeServer(t,
		envelope(http.StatusServiceUnavailable, client.CodeUnavailable, nil, "Retry-After", "30"),
		completed(`1`))
	c, _ := newClient(t, base, client.WithRetry(client.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 50 * time.Millisecond}))
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := c.Call(ctx, "echo", nil); err != nil {
		t.Fatal(err)
	}
	if gap := f.times[1].Sub(f.times[0]); gap > 2*time.Second {
		t.Fatalf("the retry waited %s, beyond MaxDelay", gap)
	}
}

func TestContextDeadlineStopsRetries(t *testing.T) {
	f, base := fakeServer(t, envelope(http.StatusServiceUnavailable, client.CodeUnavailable, nil))
	c, cnt := newClient(t, base, client.WithRetry(client.RetryPolicy{MaxAttempts: 1000, BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}))
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Call(ctx, "echo", nil)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Call took %s past a 300 ms deadline", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("%v: want both the deadline and the last UNAVAILABLE", err)
	}
	re := asRequestError(t, err)
	// Attempts counts the attempts started, the one the deadline may have
	// cut before it reached the server included.
	if re.Attempts < 2 || re.Attempts >= 1000 || int64(re.Attempts) != cnt.n.Load() || f.count() < re.Attempts-1 {
		t.Fatalf("RequestError.Attempts = %d; %d sent, server saw %d", re.Attempts, cnt.n.Load(), f.count())
	}
	if !strings.Contains(err.Error(), "attempts") {
		t.Fatalf("the error does not count the attempts: %v", err)
	}
}

// A wait that would outlast the deadline is not started.
func TestNoWaitBeyondTheDeadline(t *testing.T) {
	f, base := fakeServer(t, envelope(http.StatusServiceUnavailable, client.CodeUnavailable, nil, "Retry-After", "5"))
	c, _ := newClient(t, base, client.WithRetry(client.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Second}))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err := c.Call(ctx, "echo", nil)
	if ctx.Err() != nil {
		t.Fatal("Call waited until the deadline; it should have stopped at once")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, client.ErrUnavailable) || f.count() != 1 {
		t.Fatalf("%v after %d requests", err, f.count())
	}
}

func TestAttemptTimeoutRetries(t *testing.T) {
	slow := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	f, base := fakeServer(t, slow, completed(`"second"`))
	c, _ := newClient(t, base, client.WithRetry(client.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, AttemptTimeout: 100 * time.Millisecond}))
	res, err := c.Call(t.Context(), "echo", nil, client.RequestID("slow"))
	if err != nil || string(res.Data) != `"second"` || f.count() != 2 {
		t.Fatalf("after a timed-out attempt: %+v, %v, %d requests", res, err, f.count())
	}
}

func TestInterruptedIsSurfacedAtOnce(t *testing.T) {
	f, base := fakeServer(t,
		envelope(http.StatusConflict, client.CodeUncertain, map[string]any{"execution_id": "exec_dead", "status": "interrupted"}),
		completed(`1`))
	c, _ := newClient(t, base, client.WithRetry(fastRetry))
	_, err := c.Call(t.Context(), "create_order", map[string]string{"sku": "KB-01"}, client.RequestID("step-9"))
	if !errors.Is(err, client.ErrInterrupted) || !errors.Is(err, client.ErrUncertain) {
		t.Fatalf("%v: want ErrInterrupted", err)
	}
	if f.count() != 1 {
		t.Fatalf("an interrupted execution was asked %d times, want 1", f.count())
	}
	ae := asAPIError(t, err)
	if ae.ExecutionID != "exec_dead" || ae.ExecStatus != client.StatusInterrupted || ae.Status != http.StatusConflict {
		t.Fatalf("APIError = %+v", ae)
	}
	if re := asRequestError(t, err); re.RequestID != "step-9" || re.Attempts != 1 {
		t.Fatalf("RequestError = %+v", re)
	}
}

func TestRunningIsRetriedThenReported(t *testing.T) {
	f, base := fakeServer(t,
		envelope(http.StatusConflict, client.CodeUncertain, map[string]any{"execution_id": "exec_busy", "status": "running"}))
	c, _ := newClient(t, base, client.WithRetry(client.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}))
	_, err := c.Call(t.Context(), "echo", nil)
	if !errors.Is(err, client.ErrUncertain) || errors.Is(err, client.ErrInterrupted) || f.count() != 3 {
		t.Fatalf("%v after %d requests; want EXECUTION_UNCERTAIN running after 3", err, f.count())
	}
	if id, status, _ := asAPIError(t, err).Uncertain(); id != "exec_busy" || status != client.StatusRunning {
		t.Fatalf("Uncertain() = %s %s", id, status)
	}
	id := f.bodies[0]["request_id"]
	for _, b := range f.bodies {
		if b["request_id"] != id {
			t.Fatalf("request_id changed across retries: %v", f.bodies)
		}
	}
	// Only a call retries a running execution: a cancel does not.
	f, base = fakeServer(t,
		envelope(http.StatusConflict, client.CodeUncertain, map[string]any{"execution_id": "exec_busy", "status": "running"}))
	c, _ = newClient(t, base, client.WithRetry(fastRetry))
	if _, err := c.Cancel(t.Context(), "exec_busy"); !errors.Is(err, client.ErrUncertain) || f.count() != 1 {
		t.Fatalf("Cancel: %v after %d requests", err, f.count())
	}
}

// Every error code of docs/errors.md maps to its sentinel; none of these is retried.
func TestErrorsThatAreNotRetried(t *testing.T) {
	cases := []struct {
		status int
		code   string
		want   error
	}{
		{400, client.CodeInvalidRequest, client.ErrInvalid},
		{401, client.CodeUnauthorized, client.ErrUnauthorized},
		{403, client.CodeForbidden, client.ErrForbidden},
		{404, client.CodeUnknownTool, client.ErrUnknownTool},
		{404, client.CodeNotFound, client.ErrNotFound},
		{405, client.CodeMethodNotAllowed, client.ErrMethodNotAllowed},
		{413, client.CodePayloadTooLarge, client.ErrPayloadTooLarge},
		{415, client.CodeUnsupportedMediaType, client.ErrUnsupportedMediaType},
		{409, client.CodeConflict, client.ErrConflict},
		{409, client.CodeInvalidState, client.ErrInvalidState},
		{503, client.CodeCapacity, client.ErrCapacity},
		{500, client.CodeInternal, client.ErrInternal},
	}
	all := []error{client.ErrInvalid, client.ErrUnauthorized, client.ErrForbidden, client.ErrUnknownTool, client.ErrNotFound,
		client.ErrMethodNotAllowed, client.ErrPayloadTooLarge, client.ErrUnsupportedMediaType, client.ErrConflict,
		client.ErrUncertain, client.ErrInterrupted, client.ErrInvalidState, client.ErrCapacity, client.ErrUnavailable,
		client.ErrRateLimited, client.ErrInternal}
	for _, tc := range cases {
		f, base := fakeServer(t, envelope(tc.status, tc.code, map[string]any{"field": "request_id", "execution_id": "exec_1"}), completed(`1`))
		c, _ := newClient(t, base, client.WithRetry(fastRetry))
		_, err := c.Call(t.Context(), "echo", nil)
		if f.count() != 1 {
			t.Errorf("%s: sent %d times, want 1", tc.code, f.count())
		}
		for _, s := range all {
			if got := errors.Is(err, s); got != (s == tc.want) {
				t.Errorf("%s: errors.Is(err, %v) = %v", tc.code, s, got)
			}
		}
		if ae := asAPIError(t, err); ae.Status != tc.status || ae.Field != "request_id" || ae.Message != "fake "+tc.code {
			t.Errorf("%s: APIError = %+v", tc.code, ae)
		}
	}
}

func TestResolveEncoding(t *testing.T) {
	record := func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"execution_id":"exec_a/b","session_id":"","tool":"t","status":"completed","data":null,`+
			`"resolved":true,"started_at":"2026-11-30T10:00:00.123Z","finished_at":"2026-11-30T10:00:01Z"}`)
	}
	f, base := fakeServer(t, record)
	c, _ := newClient(t, base, client.WithRetry(fastRetry))
	for _, r := range []client.Resolution{
		client.Completed(map[string]int{"order_id": 7}),
		client.Completed(json.RawMessage(`[1,2]`)),
		client.Completed(nil),
		client.Failed("GONE", "never arrived"),
		client.Released(),
	} {
		exec, err := c.Resolve(t.Context(), "exec_a/b", r)
		if err != nil || !exec.Resolved || exec.FinishedAt.Sub(exec.StartedAt) != 877*time.Millisecond {
			t.Fatalf("Resolve(%+v) = %+v, %v", r, exec, err)
		}
	}
	want := []string{
		`{"data":{"order_id":7},"status":"completed"}`,
		`{"data":[1,2],"status":"completed"}`,
		`{"data":null,"status":"completed"}`,
		`{"error":{"code":"GONE","message":"never arrived"},"status":"failed"}`,
		`{"status":"released"}`,
	}
	for i, b := range f.bodies {
		got, _ := json.Marshal(b)
		if string(got) != want[i] {
			t.Errorf("body %d = %s, want %s", i, got, want[i])
		}
		if p := f.requests[i].URL.EscapedPath(); p != "/v1/executions/exec_a%2Fb/resolve" {
			t.Errorf("path %s", p)
		}
	}

	f, base = fakeServer(t, envelope(http.StatusConflict, client.CodeInvalidState,
		map[string]any{"execution_id": "exec_x", "status": "running"}))
	c, _ = newClient(t, base, client.WithRetry(fastRetry))
	_, err := c.Resolve(t.Context(), "exec_x", client.Released())
	ae := asAPIError(t, err)
	if !errors.Is(err, client.ErrInvalidState) || ae.ExecStatus != client.StatusRunning || ae.ExecutionID != "exec_x" || f.count() != 1 {
		t.Fatalf("INVALID_STATE: %v (%+v) after %d requests", err, ae, f.count())
	}
}

func TestHTTPSWithAPrivateCA(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(completed(`"tls"`)))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake
	srv.StartTLS()
	t.Cleanup(srv.Close)

	// Not trusted: a certificate error is final, not retried.
	c, cnt := newClient(t, srv.URL, client.WithRetry(fastRetry))
	if _, err := c.Call(t.Context(), "echo", nil); err == nil || cnt.n.Load() != 1 {
		t.Fatalf("untrusted server: %v after %d requests; want an error after 1", err, cnt.n.Load())
	}
	// https:// to a server that speaks plain HTTP: a setup mistake, final.
	_, plain := fakeServer(t, completed(`1`))
	c, cnt = newClient(t, "https://"+strings.TrimPrefix(plain, "http://"), client.WithRetry(fastRetry))
	if _, err := c.Call(t.Context(), "echo", nil); !errors.Is(err, http.ErrSchemeMismatch) || cnt.n.Load() != 1 {
		t.Fatalf("https:// to plain HTTP: %v after %d requests; want ErrSchemeMismatch after 1", err, cnt.n.Load())
	}
	c, err := client.New(srv.URL, client.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(t.Context(), "echo", nil)
	if err != nil || string(res.Data) != `"tls"` {
		t.Fatalf("over TLS with the CA: %+v, %v", res, err)
	}
}

func TestReplayedHeader(t *testing.T) {
	_, base := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Idempotent-Replayed", "true")
		completed(`1`)(w, r)
	})
	c, _ := newClient(t, base)
	res, err := c.Call(t.Context(), "echo", nil)
	if err != nil || !res.Replayed {
		t.Fatalf("Idempotent-Replayed: true gave %+v, %v", res, err)
	}
}
