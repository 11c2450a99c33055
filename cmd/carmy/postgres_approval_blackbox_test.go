package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// Tokens of the fleet's approval test (at least 16 bytes each).
const (
	pgaAlice = "alice-token-0123456789"
	pgaBob   = "bob-token-0123456789ab"
	pgaAdmin = "admin-token-0123456789"
)

// TestBlackBoxPostgresApproval: approval gates on a fleet of two nodes on
// one PostgreSQL (docs/policy.md#approval-gates). A gated call made on
// node a awaits (its retry on b too); a is killed (-9); bob approves on b,
// which runs the HTTP tool once (its upstream counts) and the retry
// replays the outcome on b. Then with two calls awaiting, both nodes are
// stopped and started again: the calls still await; one approved runs
// once, the other denied is replayed denied, and the tool never ran for
// it. The caller may not decide on its own call. A call no one decides
// on is recorded expired by the fleet's prober, and replayed so.
func TestBlackBoxPostgresApproval(t *testing.T) {
	t.Parallel()
	pg := needPostgres(t)
	bin := testutil.BuildCarmy(t)
	url := pg.URL("postgres")
	up := testutil.StartUpstream(t, nil, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"paid":true,"asked":%s}`, body)
	})
	config := fmt.Sprintf(`auth:
  tokens:
    - {principal: alice, token_env: PGA_ALICE}
    - {principal: bob, token_env: PGA_BOB}
  admin_token_env: PGA_ADMIN
tools:
  - name: pay
    approval: {required: true, approvers: [bob], expires_after: 1h}
    http: {url: "%[1]s/pay"}
  - name: quick
    approval: {required: true, approvers: [bob], expires_after: 2s}
    http: {url: "%[1]s/quick"}
`, up.URL)
	path := filepath.Join(t.TempDir(), "carmy.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PGA_ALICE=" + pgaAlice, "PGA_BOB=" + pgaBob, "PGA_ADMIN=" + pgaAdmin}
	start := func(id string) *testutil.Node {
		t.Helper()
		n := testutil.StartCarmy(t, bin, testutil.StartOptions{Env: env},
			"--config", path, "--node-id", id, "--store", url, "--store-lease", "2s")
		n.WaitReady(t, 60*time.Second)
		return n
	}
	a, b := start("a"), start("b")

	pay := func(n *testutil.Node, rid string) pgCall {
		t.Helper()
		return callWith(t, n, pgaAlice, "pay", `{"amount": 5}`, rid)
	}
	first := pay(a, "pay-1")
	if first.status != http.StatusAccepted || first.Status != "awaiting_approval" || first.ExecutionID == "" {
		t.Fatalf("gated call on a: %d %s", first.status, first.body)
	}
	if r := pay(b, "pay-1"); r.status != http.StatusAccepted || r.ExecutionID != first.ExecutionID {
		t.Fatalf("its retry on b: %d %s", r.status, r.body)
	}
	if code, body := decide(t, b, pgaAlice, first.ExecutionID, "approve"); code != http.StatusForbidden {
		t.Fatalf("the caller's own approval: %d %s, want 403", code, body)
	}

	a.Kill()
	code, body := decide(t, b, pgaBob, first.ExecutionID, "approve")
	var approved pgCall
	if err := json.Unmarshal([]byte(body), &approved); code != http.StatusOK || err != nil || approved.Status != "completed" {
		t.Fatalf("approve on b with a gone: %d %s", code, body)
	}
	if got := up.Requests.Load(); got != 1 {
		t.Fatalf("the tool ran %d times, want once", got)
	}
	again := pay(b, "pay-1")
	if again.status != http.StatusOK || !again.Replayed || again.Status != "completed" || again.ExecutionID != first.ExecutionID ||
		!strings.Contains(string(again.Data), `"amount":5`) {
		t.Fatalf("retry after the approval: %d %s", again.status, again.body)
	}
	if code, body := decide(t, b, pgaBob, first.ExecutionID, "approve"); code != http.StatusConflict || !strings.Contains(body, "INVALID_STATE") {
		t.Fatalf("a second approval: %d %s, want 409 INVALID_STATE", code, body)
	}

	// Both nodes restarted with two calls awaiting.
	a = start("a")
	toApprove, toDeny := pay(a, "pay-2"), pay(b, "pay-3")
	for _, c := range []pgCall{toApprove, toDeny} {
		if c.status != http.StatusAccepted || c.Status != "awaiting_approval" {
			t.Fatalf("gated call: %d %s", c.status, c.body)
		}
	}
	for _, n := range []*testutil.Node{a, b} {
		if err := n.Stop(30 * time.Second); err != nil {
			t.Fatalf("stopping %s: %v\n%s", n.ID(), err, n.Logs())
		}
	}
	a, b = start("a"), start("b")
	for _, c := range []pgCall{toApprove, toDeny} {
		if e := executionAs(t, a, c.ExecutionID, pgaAdmin); e.Status != "awaiting_approval" {
			t.Fatalf("%s after the restart: %s", c.ExecutionID, e.Status)
		}
	}
	if r := pay(b, "pay-2"); r.status != http.StatusAccepted || r.ExecutionID != toApprove.ExecutionID {
		t.Fatalf("retry after the restart: %d %s", r.status, r.body)
	}
	code, body = decide(t, a, pgaBob, toApprove.ExecutionID, "approve")
	if code != http.StatusOK || !strings.Contains(body, `"status":"completed"`) {
		t.Fatalf("approve after the restart: %d %s", code, body)
	}
	code, body = decide(t, b, pgaBob, toDeny.ExecutionID, "deny")
	if code != http.StatusOK || !strings.Contains(body, `"status":"denied"`) {
		t.Fatalf("deny after the restart: %d %s", code, body)
	}
	if got := up.Requests.Load(); got != 2 {
		t.Fatalf("the tool ran %d times, want twice (pay-1 and pay-2)", got)
	}
	for _, n := range []*testutil.Node{a, b} {
		if r := pay(n, "pay-2"); r.status != http.StatusOK || !r.Replayed || r.Status != "completed" {
			t.Fatalf("pay-2 replayed on %s: %d %s", n.ID(), r.status, r.body)
		}
		if r := pay(n, "pay-3"); r.status != http.StatusOK || !r.Replayed || r.Status != "denied" || r.Error.Code != "APPROVAL_DENIED" {
			t.Fatalf("pay-3 replayed on %s: %d %s", n.ID(), r.status, r.body)
		}
	}
	if got := up.Requests.Load(); got != 2 {
		t.Fatalf("after the replays the tool ran %d times, want twice", got)
	}

	// A gate no one decides on is expired by the fleet's prober.
	quick := callWith(t, b, pgaAlice, "quick", `{}`, "quick-1")
	if quick.status != http.StatusAccepted {
		t.Fatalf("gated call: %d %s", quick.status, quick.body)
	}
	wait.For(t, 30*time.Second, "the gate expired", func() error {
		if e := executionAs(t, a, quick.ExecutionID, pgaAdmin); e.Status != "expired" {
			return fmt.Errorf("status %s", e.Status)
		}
		return nil
	})
	if r := callWith(t, a, pgaAlice, "quick", `{}`, "quick-1"); !r.Replayed || r.Status != "expired" || r.Error.Code != "APPROVAL_EXPIRED" {
		t.Fatalf("quick-1 replayed: %d %s", r.status, r.body)
	}
	if got := up.Requests.Load(); got != 2 {
		t.Fatalf("after the expiry the tool ran %d times, want twice", got)
	}
}

// callWith posts a call of tool with args under requestID, as token's
// principal.
func callWith(t testing.TB, n *testutil.Node, token, tool, args, requestID string) pgCall {
	t.Helper()
	body := fmt.Sprintf(`{"tool":%q,"arguments":%s,"request_id":%q}`, tool, args, requestID)
	code, raw := doAs(t, http.MethodPost, n.URL+"/v1/tools/call", token, body)
	c := pgCall{status: code, body: raw}
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatalf("answer %d %q: %v", code, raw, err)
	}
	return c
}

// decide posts an approval or a denial (what) of id, as token's principal.
func decide(t testing.TB, n *testutil.Node, token, id, what string) (int, string) {
	t.Helper()
	return doAs(t, http.MethodPost, n.URL+"/v1/executions/"+id+"/"+what, token, "")
}

// executionAs reads GET /v1/executions/{id} as token's principal.
func executionAs(t testing.TB, n *testutil.Node, id, token string) pgCall {
	t.Helper()
	code, raw := doAs(t, http.MethodGet, n.URL+"/v1/executions/"+id, token, "")
	var c pgCall
	if err := json.Unmarshal([]byte(raw), &c); code != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/executions/%s: %d %s", id, code, raw)
	}
	return c
}

// doAs sends a request with a bearer token and a JSON body (or none).
func doAs(t testing.TB, method, url, token, body string) (int, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := pgClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}
