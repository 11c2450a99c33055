package api_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/metrics/prom"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// scrape reads GET /metrics and returns each sample's value by its line
// name with labels, e.g. `carmy_calls_total{outcome="ran",transport="http"}`.
func scrape(t *testing.T, a answer) map[string]float64 {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("GET /metrics = %d: %s", a.status, a.body)
	}
	out := make(map[string]float64)
	sc := bufio.NewScanner(bytes.NewReader(a.body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func TestMetricsCountCallsByOutcome(t *testing.T) {
	rec := completedRecord()
	running := rec
	running.Status = store.StatusRunning
	rt := &fakeRuntime{tb: t, call: func(_ context.Context, caller engine.Caller, req engine.Request) (engine.Response, error) {
		if !caller.MayCall(req.Tool) { // as the runtime refuses a tool outside the allow-list
			return engine.Response{}, &engine.ForbiddenError{Principal: caller.Principal, Tool: req.Tool}
		}
		switch req.RequestID {
		case "ran":
			return engine.Response{Record: rec}, nil
		case "replay":
			return engine.Response{Record: rec, Replayed: true}, nil
		case "pass":
			return engine.Response{Record: rec, Passthrough: true}, nil
		case "conflict":
			return engine.Response{}, &store.ConflictError{Record: rec}
		case "uncertain":
			return engine.Response{}, &store.UncertainError{Record: running}
		case "full":
			return engine.Response{}, store.ErrCapacity
		case "down":
			return engine.Response{}, store.ErrUnavailable
		case "bug":
			return engine.Response{}, errors.New("a bug")
		}
		return engine.Response{}, store.ErrInvalid
	}}
	cfg := authConfig()
	srv := newTestServer(t, rt, cfg)
	auth := []string{"Authorization", "Bearer " + allToken}
	for id, n := range map[string]int{"ran": 2, "replay": 2, "pass": 1, "conflict": 1, "uncertain": 1, "full": 1, "down": 2, "bug": 1} {
		for range n {
			post(t, srv, callPath, `{"tool":"echo","request_id":"`+id+`"}`, auth...)
		}
	}
	// A read-only tool's answer says nothing was recorded; others say nothing of it.
	if a := post(t, srv, callPath, `{"tool":"echo","request_id":"pass"}`, auth...); !strings.Contains(string(a.body), `"recorded":false`) {
		t.Errorf("a passthrough answer: %s", a.body)
	}
	if a := post(t, srv, callPath, `{"tool":"echo","request_id":"ran"}`, auth...); strings.Contains(string(a.body), `"recorded"`) {
		t.Errorf("a recorded answer: %s", a.body)
	}
	post(t, srv, callPath, `{"tool":"echo","requestId":"typo"}`, auth...)               // invalid
	post(t, srv, callPath, `{"tool":"echo"}`)                                           // denied: no token
	post(t, srv, callPath, `{"tool":"sleep"}`, "Authorization", "Bearer "+plannerToken) // denied: not its tool

	got := scrape(t, get(t, srv, "/metrics"))
	want := map[string]float64{
		"ran": 3, "replayed": 2, "passthrough": 2, "conflict": 1, "uncertain": 1, "capacity": 1,
		"unavailable": 2, "error": 1, "invalid": 1, "denied": 2,
	}
	for outcome, n := range want {
		if v := got[`carmy_calls_total{outcome="`+outcome+`",transport="http"}`]; v != n {
			t.Errorf("carmy_calls_total{outcome=%q} = %v, want %v", outcome, v, n)
		}
		if v := got[`carmy_call_duration_seconds_count{outcome="`+outcome+`",transport="http"}`]; v != n {
			t.Errorf("carmy_call_duration_seconds_count{outcome=%q} = %v, want %v", outcome, v, n)
		}
	}
}

// TestNoMetricsNoRoute checks that a server given no Metrics counts
// nothing and serves no /metrics, while it serves calls.
func TestNoMetricsNoRoute(t *testing.T) {
	rt := &fakeRuntime{tb: t, call: func(context.Context, engine.Caller, engine.Request) (engine.Response, error) {
		return engine.Response{Record: completedRecord()}, nil
	}}
	s, err := api.New(rt, api.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	if a := post(t, srv, callPath, `{"tool":"echo","request_id":"a"}`); a.status != http.StatusOK {
		t.Fatalf("a call without metrics: %d %s", a.status, a.body)
	}
	wantError(t, get(t, srv, "/metrics"), http.StatusNotFound, store.CodeNotFound)
}

func TestMetricsNeedNoTokenAndProfilesNeedAdmin(t *testing.T) {
	cfg := authConfig()
	cfg.Pprof = true
	srv := newTestServer(t, &fakeRuntime{tb: t}, cfg)
	if a := get(t, srv, "/metrics"); a.status != http.StatusOK || !bytes.Contains(a.body, []byte("carmy_calls_total")) {
		t.Errorf("GET /metrics without a token = %d, want 200 with carmy_calls_total: %.300s", a.status, a.body)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		wantError(t, get(t, srv, path), http.StatusUnauthorized, "UNAUTHORIZED")
		wantError(t, get(t, srv, path, "Authorization", "Bearer "+allToken), http.StatusForbidden, "FORBIDDEN")
		if a := get(t, srv, path, "Authorization", "Bearer "+adminToken); a.status != http.StatusOK {
			t.Errorf("GET %s as admin = %d, want 200: %.200s", path, a.status, a.body)
		}
	}
}

// TestPprofOffByDefault checks that the profiles are served only when
// Config.Pprof asks: otherwise /debug/pprof/ is no route, for the admin
// too, with auth on or off (issue 14 finding 8).
func TestPprofOffByDefault(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg    api.Config
		header []string
	}{
		"auth on":  {authConfig(), []string{"Authorization", "Bearer " + adminToken}},
		"auth off": {api.Config{}, nil},
	} {
		srv := newTestServer(t, &fakeRuntime{tb: t}, tc.cfg)
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline", "/debug/pprof/profile?seconds=1"} {
			wantError(t, get(t, srv, path, tc.header...), http.StatusNotFound, "NOT_FOUND")
		}
		t.Logf("%s: no profiles", name)
	}
	// On without auth, it is served to anyone, and said so at WARN.
	logs := &testutil.SyncBuffer{}
	srv := newTestServer(t, &fakeRuntime{tb: t}, api.Config{Pprof: true, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if a := get(t, srv, "/debug/pprof/cmdline"); a.status != http.StatusOK {
		t.Errorf("GET /debug/pprof/cmdline with pprof on, auth off: %d", a.status)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "/debug/pprof/ without authentication") {
		t.Errorf("no warning that profiles are served without authentication:\n%s", logs.String())
	}
}

// TestServersShareMetrics checks that a second server given the metrics
// of a first (Serve called again) starts, and that both count into the
// same series.
func TestServersShareMetrics(t *testing.T) {
	reg := prom.New(nil)
	rt := &fakeRuntime{tb: t, call: func(context.Context, engine.Caller, engine.Request) (engine.Response, error) {
		return engine.Response{Record: completedRecord()}, nil
	}}
	first := newTestServer(t, rt, api.Config{Metrics: reg})
	second := newTestServer(t, rt, api.Config{Metrics: reg})
	post(t, first, callPath, `{"tool":"echo","request_id":"a"}`)
	post(t, second, callPath, `{"tool":"echo","request_id":"b"}`)
	if got := scrape(t, get(t, first, "/metrics"))[`carmy_calls_total{outcome="ran",transport="http"}`]; got != 2 {
		t.Errorf("ran = %v across two servers on one registry, want 2", got)
	}
}

// TestTraceOutlastsTheWriteBound: a trace streams from its first byte for
// the seconds asked, so the write bound (counted from the header) starts
// after them; a bound shorter than the trace does not cut it. The bound
// leaves the trace a second to stop and flush: 200 ms did not always
// suffice under -race on a loaded machine.
func TestTraceOutlastsTheWriteBound(t *testing.T) {
	cfg := authConfig()
	cfg.Pprof = true
	cfg.Timeouts.Write = time.Second
	srv := newTestServer(t, &fakeRuntime{tb: t}, cfg)
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/debug/pprof/trace?seconds=2", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || len(body) == 0 {
		t.Fatalf("trace of 2 s under a 1 s write bound: %d, %d bytes, %v", resp.StatusCode, len(body), err)
	}
}
