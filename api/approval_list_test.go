package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
)

// TestListApprovals: GET /v1/executions?approvals=true lists, across
// sessions and principals, the executions awaiting approval that the
// caller may see or decide on, with their arguments: a listed approver
// sees another principal's calls it is asked to decide (which no other
// listing shows it), a caller its own, the admin all; a principal that is
// neither sees none of them; a decided call leaves it. Narrowing
// selections are refused.
func TestListApprovals(t *testing.T) {
	rt := newEngine(t)
	echo := func(_ context.Context, c engine.Call) (any, error) { return c.Arguments, nil }
	if err := rt.AddTool(engine.ToolSpec{Name: "pay", Func: echo, Approval: &engine.Approval{Approvers: []string{"bob"}}}); err != nil {
		t.Fatal(err)
	}
	const carolToken = "tok-carol-0123456789"
	srv := newTestServer(t, rt, api.Config{Auth: api.Auth{
		Tokens: []api.Token{
			{Principal: "alice", Secret: aliceToken, Tools: []string{"*"}},
			{Principal: "bob", Secret: bobToken, Tools: []string{"*"}},
			{Principal: "carol", Secret: carolToken, Tools: []string{"*"}},
		},
		AdminToken: adminToken,
	}})
	gated := func(token, session, rid string, amount int) string {
		t.Helper()
		body := fmt.Sprintf(`{"tool":"pay","arguments":{"amount":%d},"request_id":%q,"session_id":%q}`, amount, rid, session)
		m := wantJSON(t, post(t, srv, "/v1/tools/call", body, "Authorization", "Bearer "+token), http.StatusAccepted)
		return m["execution_id"].(string)
	}
	a1 := gated(aliceToken, "s1", "a1", 10)
	a2 := gated(aliceToken, "s2", "a2", 20)
	b1 := gated(bobToken, "", "b1", 30)
	callAs(t, srv, aliceToken, "echo", "s1", "plain") // not gated: never listed

	// list returns the ids GET path lists to token, and each one's arguments.
	list := func(token, path string) ([]string, map[string]string) {
		t.Helper()
		m := wantJSON(t, get(t, srv, path, "Authorization", "Bearer "+token), http.StatusOK)
		var ids []string
		args := map[string]string{}
		for _, e := range m["executions"].([]any) {
			rec := e.(map[string]any)
			id := rec["execution_id"].(string)
			ids = append(ids, id)
			if g, ok := rec["approval"].(map[string]any); ok {
				args[id] = fmt.Sprint(g["arguments"])
			}
		}
		slices.Sort(ids)
		return ids, args
	}
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }
	const path = "/v1/executions?approvals=true"

	ids, args := list(bobToken, path)
	if want := sorted(a1, a2, b1); !slices.Equal(ids, want) {
		t.Errorf("the approver bob lists %v, want alice's two calls and its own %v", ids, want)
	}
	if args[a1] != "map[amount:10]" || args[a2] != "map[amount:20]" {
		t.Errorf("the approver reads the arguments %v, want alice's", args)
	}
	if ids, _ := list(bobToken, "/v1/executions?status=awaiting_approval&all_sessions=true"); !slices.Equal(ids, []string{b1}) {
		t.Errorf("bob's own listing of awaiting calls: %v, want only its own %s (approvals=true alone widens it)", ids, b1)
	}
	if ids, _ := list(aliceToken, path); !slices.Equal(ids, sorted(a1, a2)) {
		t.Errorf("alice lists %v, want its own two calls", ids)
	}
	if ids, _ := list(carolToken, path); len(ids) != 0 {
		t.Errorf("carol, neither caller nor approver, lists %v", ids)
	}
	if ids, _ := list(adminToken, path); !slices.Equal(ids, sorted(a1, a2, b1)) {
		t.Errorf("the admin lists %v, want all three", ids)
	}
	if ids, _ := list(bobToken, path+"&tool=echo"); len(ids) != 0 {
		t.Errorf("tool=echo: %v, want none", ids)
	}

	wantJSON(t, post(t, srv, "/v1/executions/"+a1+"/deny", `{"reason":"no"}`, "Authorization", "Bearer "+bobToken), http.StatusOK)
	if ids, _ := list(bobToken, path); !slices.Equal(ids, sorted(a2, b1)) {
		t.Errorf("after the denial of a1, bob lists %v, want a2 and b1", ids)
	}

	for _, q := range []string{"&status=awaiting_approval", "&session_id=s1", "&all_sessions=true", "&principal=alice", "&attention=true"} {
		wantField(t, get(t, srv, path+q, "Authorization", "Bearer "+bobToken), "approvals")
	}
	wantField(t, get(t, srv, "/v1/executions?approvals=yes", "Authorization", "Bearer "+bobToken), "approvals")
}
