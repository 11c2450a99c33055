package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/store"
)

// stepClock is a clock the test moves, shared with the server.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type activityAnswer struct {
	NodeID        string   `json:"node_id"`
	StepSeconds   int      `json:"step_seconds"`
	WindowSeconds int      `json:"window_seconds"`
	Outcomes      []string `json:"outcomes"`
	Points        []struct {
		Time      time.Time `json:"time"`
		Fresh     float64   `json:"fresh"`
		Replayed  float64   `json:"replayed"`
		Conflict  float64   `json:"conflict"`
		Uncertain float64   `json:"uncertain"`
		Refused   float64   `json:"refused"`
	} `json:"points"`
}

// activityServer serves a real runtime to alice and the admin, its
// activity counted on clock.
func activityServer(t *testing.T, clock *stepClock, auth api.Auth) *httptest.Server {
	t.Helper()
	s := mustNew(t, newEngine(t, "other"), api.Config{Auth: auth})
	api.SetActivityClock(s, clock.now)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

func getActivity(t *testing.T, srv *httptest.Server, kv ...string) activityAnswer {
	t.Helper()
	a := get(t, srv, "/v1/activity", kv...)
	wantJSON(t, a, http.StatusOK)
	var out activityAnswer
	if err := json.Unmarshal(a.body, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestActivityCountsHTTPAndMCPCalls calls tools over HTTP and MCP with
// every outcome, then reads the step they fell in.
func TestActivityCountsHTTPAndMCPCalls(t *testing.T) {
	start := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	clock := &stepClock{t: start}
	srv := activityServer(t, clock, api.Auth{
		Tokens:     []api.Token{{Principal: "alice", Secret: aliceToken, Tools: []string{"echo"}}},
		AdminToken: adminToken,
	})
	alice := []string{"Authorization", "Bearer " + aliceToken}
	admin := []string{"Authorization", "Bearer " + adminToken}

	call := func(body string, status int) {
		t.Helper()
		if a := post(t, srv, "/v1/tools/call", body, alice...); a.status != status {
			t.Fatalf("POST %s = %d, want %d: %s", body, a.status, status, a.body)
		}
	}
	call(`{"tool":"echo","arguments":{"a":1},"request_id":"r1"}`, http.StatusOK)       // fresh
	call(`{"tool":"echo","arguments":{"a":1},"request_id":"r1"}`, http.StatusOK)       // replayed
	call(`{"tool":"echo","arguments":{"a":2},"request_id":"r1"}`, http.StatusConflict) // conflict
	call(`{"tool":"other","arguments":{},"request_id":"r2"}`, http.StatusForbidden)    // refused
	call(`{"tool":"echo","arguments":`, http.StatusBadRequest)                         // refused
	post(t, srv, "/v1/tools/call", `{"tool":"echo"}`)                                  // refused: no token
	if code := mcpCallCode(t, srv.URL, aliceToken, "echo", `{"m":1}`, "m1"); code != "" {
		t.Fatalf("MCP call: %s", code)
	}
	if code := mcpCallCode(t, srv.URL, aliceToken, "echo", `{"m":1}`, "m1"); code != "" {
		t.Fatalf("MCP replay: %s", code)
	}
	if code := mcpCallCode(t, srv.URL, aliceToken, "echo", `{"m":2}`, "m1"); code != store.CodeConflict {
		t.Fatalf("MCP conflict: %q", code)
	}

	// Reading activity is not a call, and needs the admin token.
	wantError(t, get(t, srv, "/v1/activity", alice...), http.StatusForbidden, store.CodeForbidden)
	wantError(t, get(t, srv, "/v1/activity"), http.StatusUnauthorized, store.CodeUnauthorized)
	wantField(t, get(t, srv, "/v1/activity?window=60", admin...), "window")

	clock.add(5 * time.Second)
	got := getActivity(t, srv, admin...)
	if got.NodeID != "node1" || got.StepSeconds != 5 || got.WindowSeconds != 900 || len(got.Points) != 180 {
		t.Fatalf("answer = node %q, step %d, window %d, %d points; want node1, 5, 900, 180",
			got.NodeID, got.StepSeconds, got.WindowSeconds, len(got.Points))
	}
	if want := []string{"fresh", "replayed", "conflict", "uncertain", "refused"}; len(got.Outcomes) != 5 || got.Outcomes[0] != want[0] || got.Outcomes[4] != want[4] {
		t.Fatalf("outcomes = %v, want %v", got.Outcomes, want)
	}
	p := got.Points[178]
	if !p.Time.Equal(start) || p.Fresh != 0.4 || p.Replayed != 0.4 || p.Conflict != 0.4 || p.Uncertain != 0 || p.Refused != 0.6 {
		t.Fatalf("the step of the calls = %+v; want 2 fresh, 2 replayed, 2 conflicts and 3 refused in 5 s", p)
	}
	if last := got.Points[179]; !last.Time.Equal(start.Add(5*time.Second)) || last.Fresh != 0 || last.Refused != 0 {
		t.Fatalf("the current step = %+v, want an empty step at %v", last, start.Add(5*time.Second))
	}

	// 15 minutes later the calls are out of the window.
	clock.add(15 * time.Minute)
	for i, p := range getActivity(t, srv, admin...).Points {
		if p.Fresh+p.Replayed+p.Conflict+p.Uncertain+p.Refused != 0 {
			t.Fatalf("point %d 15 minutes later = %+v, want zeros", i, p)
		}
	}
}

func TestActivityWithoutAuth(t *testing.T) {
	clock := &stepClock{t: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}
	srv := activityServer(t, clock, api.Auth{})
	if a := post(t, srv, "/v1/tools/call", `{"tool":"echo","arguments":{}}`); a.status != http.StatusOK {
		t.Fatalf("call = %d: %s", a.status, a.body)
	}
	clock.add(5 * time.Second)
	if p := getActivity(t, srv).Points[178]; p.Fresh != 0.2 {
		t.Fatalf("the step of one call = %+v, want 0.2 fresh a second", p)
	}
}
