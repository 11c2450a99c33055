package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

const (
	aliceToken = "tok-alice-0123456789"
	bobToken   = "tok-bob-0123456789"
)

// listServer serves a real runtime, with the tools echo and other, to
// alice, bob and the admin.
func listServer(t *testing.T) (*engine.Runtime, *httptest.Server) {
	t.Helper()
	rt := newEngine(t, "other")
	srv := newTestServer(t, rt, api.Config{Auth: api.Auth{
		Tokens: []api.Token{
			{Principal: "alice", Secret: aliceToken, Tools: []string{"*"}},
			{Principal: "bob", Secret: bobToken, Tools: []string{"*"}},
		},
		AdminToken: adminToken,
	}})
	return rt, srv
}

// callAs calls tool with the token and returns the execution id.
func callAs(t *testing.T, srv *httptest.Server, token, tool, session, requestID string) string {
	t.Helper()
	body := fmt.Sprintf(`{"tool":%q,"arguments":{},"request_id":%q,"session_id":%q}`, tool, requestID, session)
	m := wantJSON(t, post(t, srv, "/v1/tools/call", body, "Authorization", "Bearer "+token), http.StatusOK)
	id, _ := m["execution_id"].(string)
	if id == "" {
		t.Fatalf("no execution_id in %v", m)
	}
	return id
}

// listAs pages through GET path with the token and returns the execution
// ids listed, checking that every page but the last is full when limit
// is set.
func listAs(t *testing.T, srv *httptest.Server, token, path string, limit int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatalf("%s does not end", path)
		}
		p := path
		if limit > 0 {
			p += fmt.Sprintf("&limit=%d", limit)
		}
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		m := wantJSON(t, get(t, srv, p, "Authorization", "Bearer "+token), http.StatusOK)
		execs, _ := m["executions"].([]any)
		for _, e := range execs {
			ids = append(ids, e.(map[string]any)["execution_id"].(string))
		}
		cursor, _ = m["next_cursor"].(string)
		if cursor == "" {
			return ids
		}
		if len(execs) != limit {
			t.Fatalf("%s: a page of %d before the last, want %d", p, len(execs), limit)
		}
	}
}

func TestListingFilters(t *testing.T) {
	_, srv := listServer(t)
	a1 := callAs(t, srv, aliceToken, "echo", "", "a1")
	a2 := callAs(t, srv, aliceToken, "other", "s1", "a2")
	b1 := callAs(t, srv, bobToken, "echo", "s2", "b1")
	a3 := callAs(t, srv, aliceToken, "echo", "s1", "a3")
	b2 := callAs(t, srv, bobToken, "other", "", "b2")

	cases := []struct {
		name, token, query string
		want               []string
	}{
		{"a tenant without session_id: the session \"\"", aliceToken, "", []string{a1}},
		{"a tenant's one session", aliceToken, "session_id=s1", []string{a3, a2}},
		{"a tenant's every session", aliceToken, "all_sessions=true", []string{a3, a2, a1}},
		{"a tenant naming itself", aliceToken, "all_sessions=true&principal=alice", []string{a3, a2, a1}},
		{"all_sessions=false", aliceToken, "all_sessions=false", []string{a1}},
		{"the admin without session_id: every session", adminToken, "", []string{b2, a3, b1, a2, a1}},
		{"the admin with all_sessions", adminToken, "all_sessions=true", []string{b2, a3, b1, a2, a1}},
		{"the admin's one session", adminToken, "session_id=", []string{b2, a1}},
		{"the admin naming a principal", adminToken, "principal=bob", []string{b2, b1}},
		{"the admin naming a principal in a session", adminToken, "principal=alice&session_id=s1", []string{a3, a2}},
		{"a tool", adminToken, "tool=other", []string{b2, a2}},
		{"a tool of a tenant", aliceToken, "tool=echo&all_sessions=true", []string{a3, a1}},
		{"a status", adminToken, "status=completed", []string{b2, a3, b1, a2, a1}},
		{"statuses", adminToken, "status=running,interrupted", nil},
		{"a status and a tool", adminToken, "status=completed,failed&tool=echo&principal=bob", []string{b1}},
		{"attention", adminToken, "attention=true", nil},
	}
	for _, c := range cases {
		for _, limit := range []int{0, 1, 2} {
			got := listAs(t, srv, c.token, "/v1/executions?"+c.query, limit)
			if !slices.Equal(got, c.want) {
				t.Errorf("%s (limit %d): listed %v, want %v", c.name, limit, got, c.want)
			}
		}
	}
}

func TestListingRefusals(t *testing.T) {
	_, srv := listServer(t)
	auth := func(token string) []string { return []string{"Authorization", "Bearer " + token} }

	e := wantError(t, get(t, srv, "/v1/executions?principal=bob", auth(aliceToken)...), http.StatusForbidden, store.CodeForbidden)
	if msg, _ := e["message"].(string); !strings.Contains(msg, "own principal") {
		t.Errorf("message = %q, want it to say a token sees only its own principal's executions", msg)
	}
	wantError(t, get(t, srv, "/v1/executions?principal=bob&all_sessions=true", auth(aliceToken)...), http.StatusForbidden, store.CodeForbidden)

	e = wantField(t, get(t, srv, "/v1/executions?status=completed,bogus", auth(aliceToken)...), "status")
	if msg, _ := e["message"].(string); !strings.Contains(msg, `"bogus"`) {
		t.Errorf("message = %q, want it to name the status", msg)
	}
	for _, tc := range []struct{ query, field string }{
		{"status=timed%20out", "status"},
		{"status=", "status"},
		{"status=completed,", "status"},
		{"tool=", "tool"},
		{"principal=", "principal"},
		{"all_sessions=true&session_id=s", "all_sessions"},
		{"all_sessions=yes", "all_sessions"},
		{"attention=1", "attention"},
		{"request_id=r&status=completed", "request_id"},
		{"request_id=r&all_sessions=true", "request_id"},
		{"request_id=r&attention=true", "request_id"},
		{"states=running", "states"},
	} {
		wantField(t, get(t, srv, "/v1/executions?"+tc.query, auth(adminToken)...), tc.field)
	}
}

// gone is an in-memory backend whose liveness declares some nodes'
// runners gone.
type gone struct {
	*store.Memory
	nodes map[string]bool
}

func (g gone) RunnerGone(node string) bool { return g.nodes[node] }

// TestListingAttention lists the executions that need a person: the
// interrupted ones, and the running ones of a node the cluster declared
// gone (dead, or no longer a member); not those of a live node.
func TestListingAttention(t *testing.T) {
	rt, srv := listServer(t)
	rt.IdempotencyStore(gone{Memory: store.NewMemory(store.DefaultCapacity), nodes: map[string]bool{"node-dead": true}})
	ctx := t.Context()
	reserve := func(principal, requestID, node string) string {
		fp, err := store.Fingerprint("echo", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		res, err := rt.Store().Reserve(ctx, store.Key{Principal: principal, RequestID: requestID}, fp,
			store.Execution{ID: engine.NewExecutionID(now), Tool: "echo", NodeID: node, StartedAt: now})
		if err != nil || res.Outcome != store.Reserved {
			t.Fatalf("Reserve = %+v, %v", res, err)
		}
		return res.Record.ExecutionID
	}
	callAs(t, srv, aliceToken, "echo", "", "done")
	dead := reserve("alice", "dead", "node-dead")
	live := reserve("alice", "live", "node-live")
	interrupted := reserve("bob", "interrupted", "node-old")
	if _, err := rt.Store().MarkInterrupted(ctx, "node-old"); err != nil {
		t.Fatal(err)
	}

	if got := listAs(t, srv, adminToken, "/v1/executions?attention=true", 0); !slices.Equal(got, []string{interrupted, dead}) {
		t.Fatalf("admin's attention listing = %v, want [%s %s] (not the live node's %s)", got, interrupted, dead, live)
	}
	if got := listAs(t, srv, adminToken, "/v1/executions?attention=true", 1); !slices.Equal(got, []string{interrupted, dead}) {
		t.Fatalf("admin's attention listing, pages of 1 = %v", got)
	}
	if got := listAs(t, srv, aliceToken, "/v1/executions?attention=true&all_sessions=true", 0); !slices.Equal(got, []string{dead}) {
		t.Fatalf("alice's attention listing = %v, want [%s]", got, dead)
	}
	if got := listAs(t, srv, adminToken, "/v1/executions?attention=true&status=running", 0); !slices.Equal(got, []string{dead}) {
		t.Fatalf("attention and running = %v, want [%s]", got, dead)
	}
	if got := listAs(t, srv, adminToken, "/v1/executions?status=running", 0); !slices.Equal(got, []string{live, dead}) {
		t.Fatalf("running = %v, want [%s %s]", got, live, dead)
	}
}
