package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// TestRateLimitPerPrincipal checks that a principal over its rate gets
// 429 RATE_LIMITED naming it, with Retry-After, without reaching the
// runtime; that other principals and the admin are not held back; and
// that the principal is served again once its bucket refills.
func TestRateLimitPerPrincipal(t *testing.T) {
	cfg := authConfig()
	cfg.RateLimit = api.RateLimit{PerSecond: 5, Burst: 2}
	calls := 0
	rt := &fakeRuntime{tb: t, call: func(context.Context, engine.Caller, engine.Request) (engine.Response, error) {
		calls++
		return engine.Response{Record: completedRecord()}, nil
	}}
	srv := newTestServer(t, rt, cfg)
	planner := []string{"Authorization", "Bearer " + plannerToken}
	body := `{"tool":"echo","request_id":"r"}`

	for i := range 2 {
		if a := post(t, srv, callPath, body, planner...); a.status != http.StatusOK {
			t.Fatalf("call %d within the burst: %d %s", i+1, a.status, a.body)
		}
	}
	a := post(t, srv, callPath, body, planner...)
	e := wantError(t, a, http.StatusTooManyRequests, "RATE_LIMITED")
	if e["principal"] != "planner" || a.header.Get("Retry-After") == "" {
		t.Errorf("429 = %v, Retry-After %q: want the principal named and a Retry-After", e, a.header.Get("Retry-After"))
	}
	if calls != 2 {
		t.Errorf("the runtime saw %d calls, want 2: a limited call must not reach it", calls)
	}
	// Others are not held back by planner's rate.
	if a := post(t, srv, callPath, body, "Authorization", "Bearer "+allToken); a.status != http.StatusOK {
		t.Errorf("another principal: %d %s, want 200", a.status, a.body)
	}
	for range 5 {
		if a := get(t, srv, "/v1/tools", "Authorization", "Bearer "+adminToken); a.status != http.StatusOK {
			t.Fatalf("the admin: %d %s, want 200 (not limited)", a.status, a.body)
		}
	}
	// The bucket refills at 5 per second.
	wait.Until(t, 10*time.Second, "planner to be served again", func() bool {
		return post(t, srv, callPath, body, planner...).status == http.StatusOK
	})
	m := scrape(t, get(t, srv, "/metrics"))
	if m[`carmy_calls_total{outcome="rate_limited",transport="http"}`] < 1 {
		t.Errorf("no rate_limited call counted: %v", m[`carmy_calls_total{outcome="rate_limited",transport="http"}`])
	}
}

func TestRateLimitRefusesNegative(t *testing.T) {
	if _, err := api.New(&fakeRuntime{tb: t}, api.Config{RateLimit: api.RateLimit{PerSecond: -1}}); err == nil {
		t.Error("a negative rate was accepted")
	}
}
