package main_test

// Black-box test of approval gates (docs/policy.md#approval-gates) and of
// tool effects from MCP annotations (docs/policy.md), on a cluster of
// three built `carmy serve` processes with auth on, in front of an HTTP
// upstream and an MCP upstream that count their runs.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestBlackBoxApprovalGates: a gated call awaits on every node; the
// reserving node killed with -9, an approval on another runs the tool once
// and every node replays it; the caller may not approve her own call, a
// principal who is not an approver is told the execution does not exist,
// the admin may; a denial and an expiry are replayed everywhere; fifty
// concurrent approvals on two nodes run the tool once and the others are
// told the record; the approving node killed while the tool runs leaves
// it interrupted, never run again; a full restart of the cluster keeps an awaiting and a
// denied execution as they were. And an MCP tool's readOnlyHint is
// believed only from a trusted server: then nothing is written to the Raft
// log.
func TestBlackBoxApprovalGates(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds the carmy binary and runs a cluster of three processes")
	}
	bin := testutil.BuildCarmy(t)
	pay := newAPCounter(t, 500*time.Millisecond)
	mcpUp, mcpRuns := newAnnotatedUpstream(t)
	config := fmt.Sprintf(`tools:
  - name: pay
    approval: {required: true, approvers: [bob]}
    http: {url: %[1]s/pay}
  - name: quick
    approval: {required: true, approvers: [bob], expires_after: 2s}
    http: {url: %[1]s/pay}
mcp_servers:
  - name: trusted
    url: %[2]s
    trust_annotations: true
  - name: untrusted
    url: %[2]s
auth:
  tokens:
    - {principal: alice, token_env: AP_ALICE}
    - {principal: bob, token_env: AP_BOB}
    - {principal: carol, token_env: AP_CAROL}
  admin_token_env: AP_ADMIN
`, pay.URL, mcpUp.URL)
	path := filepath.Join(t.TempDir(), "carmy.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	c := testutil.StartCluster(t, bin, 3, testutil.StartOptions{Env: apEnv, StatusToken: apAdmin}, "--config", path, "--fast-failover")
	node := func(id string) *testutil.Node { return c.Node(id) }
	all := func() []*testutil.Node { return []*testutil.Node{node("n1"), node("n2"), node("n3")} }

	// docs/policy.md, effects: untrusted annotations change nothing;
	// trusted, readOnlyHint means nothing is reserved.
	t.Run("effects from annotations", func(t *testing.T) {
		for _, n := range all() {
			gwWaitToolsAs(t, n.URL, apAlice, "trusted.wipe", "untrusted.wipe")
		}
		before := apWaitAppliedQuiet(t, all())
		for _, n := range all() {
			a := apMust(t, http.MethodPost, n.URL+"/v1/tools/call", apAlice, `{"tool":"trusted.wipe","request_id":"ro-1"}`)
			if a.Code != http.StatusOK || a.V.Status != "completed" || a.V.Recorded == nil || *a.V.Recorded || a.V.Replayed {
				t.Fatalf("trusted.wipe on %s: %s; want 200 completed, recorded false", n.ID(), a)
			}
		}
		if got := mcpRuns("ro-1"); got != 3 {
			t.Fatalf("trusted.wipe with one request_id on three nodes ran %d times, want 3 (nothing recorded)", got)
		}
		for _, n := range all() {
			if after := apAppliedIndex(t, n); after != before {
				t.Fatalf("%s: applied index %d before the read-only calls, %d after: they wrote to the Raft log", n.ID(), before, after)
			}
		}

		first := apMust(t, http.MethodPost, node("n1").URL+"/v1/tools/call", apAlice, `{"tool":"untrusted.wipe","request_id":"rw-1"}`)
		if first.Code != http.StatusOK || first.V.Status != "completed" || first.V.Recorded != nil || first.V.Replayed {
			t.Fatalf("untrusted.wipe: %s; want 200 completed and recorded", first)
		}
		for _, n := range all()[1:] {
			again := apMust(t, http.MethodPost, n.URL+"/v1/tools/call", apAlice, `{"tool":"untrusted.wipe","request_id":"rw-1"}`)
			apReplayed(t, "untrusted.wipe again on "+n.ID(), again, first.V.ExecutionID, "completed", "", first.V.Data)
		}
		if got := mcpRuns("rw-1"); got != 1 {
			t.Fatalf("untrusted.wipe with one request_id ran %d times, want once", got)
		}
		if after := apAppliedIndex(t, node("n1")); after <= before {
			t.Fatalf("applied index %d after a recorded call, %d before: the control wrote nothing", after, before)
		}
	})

	// Who may decide: never the caller (403), not a principal who is
	// neither approver nor admin (404, as for any execution it may not
	// see); the admin may.
	t.Run("who may decide", func(t *testing.T) {
		a := apCall(t, node("n1"), "pay", "who-1")
		apAwaiting(t, "the gated call", a, nil)
		id := a.V.ExecutionID
		if d, err := apDecide(node("n2"), apAlice, id, "approve"); err != nil || d.Code != http.StatusForbidden || d.V.Error.Code != "FORBIDDEN" {
			t.Fatalf("alice approves her own call: %v %v; want 403 FORBIDDEN", d, err)
		}
		for _, kind := range []string{"approve", "deny"} {
			if d, err := apDecide(node("n3"), apCarol, id, kind); err != nil || d.Code != http.StatusNotFound || d.V.Error.Code != "NOT_FOUND" {
				t.Fatalf("carol decides (%s): %v %v; want 404 NOT_FOUND", kind, d, err)
			}
		}
		if got := pay.runsOf("who-1"); got != 0 {
			t.Fatalf("the refused decisions ran the tool %d times", got)
		}
		apAwaiting(t, "the retry after the refusals", apCall(t, node("n3"), "pay", "who-1"), &a)
		d, err := apDecide(node("n3"), apAdmin, id, "approve")
		if err != nil || d.Code != http.StatusOK || d.V.Status != "completed" || d.V.Approval == nil || d.V.Approval.Decision == nil ||
			d.V.Approval.Decision.By != "admin" {
			t.Fatalf("the admin approves: %v %v; want 200 completed, decided by admin", d, err)
		}
		if got := pay.runsOf("who-1"); got != 1 {
			t.Fatalf("approved by the admin, the tool ran %d times, want once", got)
		}
		apReplayed(t, "the retry", apCall(t, node("n1"), "pay", "who-1"), id, "completed", "", d.V.Data)
	})

	// The node that reserved the call killed with -9; bob approves on
	// another: the tool runs once and every node replays it.
	t.Run("approval after the reserving node is killed", func(t *testing.T) {
		a := apCall(t, node("n1"), "pay", "kill-1")
		apAwaiting(t, "the gated call on n1", a, nil)
		id := a.V.ExecutionID
		apAwaiting(t, "its retry on n2", apCall(t, node("n2"), "pay", "kill-1"), &a)

		node("n1").Kill()
		c.Leader(t, 30*time.Second)
		var d apAnswer
		testutil.WaitFor(t, 30*time.Second, "bob's approval on n3 taken", func() error {
			var err error
			d, err = apDecide(node("n3"), apBob, id, "approve")
			if err != nil {
				return err
			}
			if d.Code == http.StatusServiceUnavailable {
				return fmt.Errorf("not yet: %s", d)
			}
			return nil
		})
		if d.Code != http.StatusOK || d.V.Status != "completed" || d.V.Approval == nil || d.V.Approval.Decision == nil || d.V.Approval.Decision.By != "bob" {
			t.Fatalf("bob approves on n3 with n1 gone: %s; want 200 completed, decided by bob", d)
		}
		if got := pay.runsOf("kill-1"); got != 1 {
			t.Fatalf("the tool ran %d times, want once", got)
		}
		if rec := apMust(t, http.MethodGet, node("n2").URL+"/v1/executions/"+id, apAdmin, ""); rec.V.NodeID != "n3" || rec.V.Status != "completed" {
			t.Fatalf("the record after the approval: %s; want completed, run by n3 (the approving node)", rec)
		}
		for _, id2 := range []string{"n2", "n3"} {
			apReplayed(t, "the retry on "+id2, apCall(t, node(id2), "pay", "kill-1"), id, "completed", "", d.V.Data)
		}

		n1 := c.Restart(t, "n1", apRestartArgs(node("n1"))...)
		c.WaitFormed(t, 3, 60*time.Second)
		apReplayed(t, "the retry on the restarted n1", apCall(t, n1, "pay", "kill-1"), id, "completed", "", d.V.Data)
		if got := pay.runsOf("kill-1"); got != 1 {
			t.Fatalf("after the retries the tool ran %d times, want once", got)
		}
	})

	// docs/mcp.md#approval-gates-and-tasks, against the built binary: a
	// task client's gated call is input_required on every node until bob
	// approves over HTTP on another node; then the task completes and
	// tasks/result gives the tool's result; one run.
	t.Run("a task client polls input_required", func(t *testing.T) {
		call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"amount":5},"task":{},"_meta":{"carmy/request_id":"task-1"}}}`
		tk := apTaskOf(t, "the task call on n2", apMCP(t, node("n2"), call))
		id, _ := tk["taskId"].(string)
		if tk["status"] != "input_required" || !strings.HasPrefix(id, "exec_") {
			t.Fatalf("the gated task call: %v, want an input_required task", tk)
		}
		get := `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"` + id + `"}}`
		for _, n := range []string{"n1", "n3"} {
			if r := apResultOf(t, "tasks/get on "+n, apMCP(t, node(n), get)); r["status"] != "input_required" {
				t.Fatalf("tasks/get on %s while awaiting: %v", n, r)
			}
		}
		if d := apMust(t, http.MethodPost, node("n1").URL+"/v1/executions/"+id+"/approve", apBob, ""); d.Code != http.StatusOK || d.V.Status != "completed" {
			t.Fatalf("bob approves on n1: %s", d)
		}
		if r := apResultOf(t, "tasks/get on n2", apMCP(t, node("n2"), get)); r["status"] != "completed" {
			t.Fatalf("tasks/get after the approval: %v", r)
		}
		res := apResultOf(t, "tasks/result on n3", apMCP(t, node("n3"), `{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"`+id+`"}}`))
		if res["isError"] == true || res["structuredContent"] == nil {
			t.Fatalf("tasks/result after the approval: %v", res)
		}
		if got := pay.runsOf("task-1"); got != 1 {
			t.Fatalf("the tool ran %d times, want once", got)
		}
	})

	t.Run("denial and expiry replayed everywhere", func(t *testing.T) {
		a := apCall(t, node("n2"), "pay", "deny-1")
		apAwaiting(t, "the gated call", a, nil)
		d, err := apDecide(node("n1"), apBob, a.V.ExecutionID, "deny")
		if err != nil || d.Code != http.StatusOK || d.V.Status != "denied" || d.V.Error.Code != "APPROVAL_DENIED" {
			t.Fatalf("bob denies: %v %v; want 200 denied APPROVAL_DENIED", d, err)
		}
		for _, n := range all() {
			apReplayed(t, "the retry of the denied call on "+n.ID(), apCall(t, n, "pay", "deny-1"), a.V.ExecutionID, "denied", "APPROVAL_DENIED", nil)
		}

		q := apCall(t, node("n3"), "quick", "exp-1")
		apAwaiting(t, "the quick gated call", q, nil)
		testutil.WaitFor(t, 20*time.Second, "the gate to expire, on every node", func() error {
			for _, n := range all() {
				rec, err := apDo(http.MethodGet, n.URL+"/v1/executions/"+q.V.ExecutionID, apAlice, "")
				if err != nil {
					return err
				}
				if rec.V.Status != "expired" {
					return fmt.Errorf("%s: %s", n.ID(), rec)
				}
			}
			return nil
		})
		for _, n := range all() {
			apReplayed(t, "the retry of the expired call on "+n.ID(), apCall(t, n, "quick", "exp-1"), q.V.ExecutionID, "expired", "APPROVAL_EXPIRED", nil)
		}
		if d, err := apDecide(node("n2"), apBob, q.V.ExecutionID, "approve"); err != nil || d.Code != http.StatusConflict ||
			d.V.Error.Code != "INVALID_STATE" || d.V.Error.Status != "expired" {
			t.Fatalf("an approval after the expiry: %v %v; want 409 INVALID_STATE naming expired", d, err)
		}
		for _, rid := range []string{"deny-1", "exp-1"} {
			if got := pay.runsOf(rid); got != 0 {
				t.Fatalf("%s ran %d times, want never", rid, got)
			}
		}
	})

	// Fifty approvals at once, bob's on n2 and the admin's on n3, of a
	// call whose tool takes half a second: one runs it; the others are
	// told the record as it stands (running, or its outcome).
	t.Run("fifty concurrent approvals", func(t *testing.T) {
		a := apCall(t, node("n1"), "pay", "slow-50")
		apAwaiting(t, "the gated call", a, nil)
		id := a.V.ExecutionID
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			won     []apAnswer
			told    = map[string]int{}
			unknown []string
		)
		for i := range 50 {
			n, token := node("n2"), apBob
			if i%2 == 1 {
				n, token = node("n3"), apAdmin
			}
			wg.Go(func() {
				d, err := apDecide(n, token, id, "approve")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					unknown = append(unknown, err.Error())
				case d.Code == http.StatusOK:
					won = append(won, d)
				case d.Code == http.StatusConflict && d.V.Error.Code == "INVALID_STATE" && d.V.Error.ExecutionID == id &&
					(d.V.Error.Status == "running" || d.V.Error.Status == "completed"):
					told[d.V.Error.Status]++
				default:
					unknown = append(unknown, d.String())
				}
			})
		}
		wg.Wait()
		if len(won) != 1 || told["running"]+told["completed"] != 49 || unknown != nil {
			t.Fatalf("%d approvals won (%v), %d told the record (%v), others: %q", len(won), won, told["running"]+told["completed"], told, unknown)
		}
		if w := won[0]; w.V.Status != "completed" || w.V.Approval == nil || w.V.Approval.Decision == nil {
			t.Fatalf("the approval that won: %s; want completed with its decision", w)
		}
		t.Logf("of 49 approvals that lost, %d were told running, %d completed", told["running"], told["completed"])
		if got := pay.runsOf("slow-50"); got != 1 {
			t.Fatalf("the tool ran %d times, want once", got)
		}
		for _, n := range all() {
			apReplayed(t, "the retry on "+n.ID(), apCall(t, n, "pay", "slow-50"), id, "completed", "", won[0].V.Data)
		}
		// Nothing of the losing approvals is left held on the nodes that
		// took them (each registered the call's arguments in flight).
		testutil.WaitFor(t, 10*time.Second, "no bytes left in flight on any node", func() error {
			for _, n := range all() {
				v, err := n.Metric("carmy_inflight_bytes")
				if err != nil {
					return err
				}
				if v != 0 {
					return fmt.Errorf("%s: carmy_inflight_bytes %v", n.ID(), v)
				}
			}
			return nil
		})
	})

	// docs/policy.md: an approved execution is an ordinary running one:
	// its node killed with -9 while the tool runs, it becomes interrupted,
	// never runs again, and cannot be approved again.
	t.Run("approving node killed while the tool runs", func(t *testing.T) {
		a := apCall(t, node("n1"), "pay", "hang-1")
		apAwaiting(t, "the gated call", a, nil)
		id := a.V.ExecutionID
		n2 := node("n2")
		go apDecide(n2, apBob, id, "approve") // answered by no one: n2 dies first
		testutil.WaitUntil(t, 30*time.Second, "the approved tool to reach the upstream", func() bool { return pay.runsOf("hang-1") == 1 })
		n2.Kill()
		if d, err := apDecide(node("n3"), apAdmin, id, "approve"); err != nil || d.Code != http.StatusConflict || d.V.Error.Code != "INVALID_STATE" {
			t.Fatalf("a second approval, its runner dead: %v %v; want 409 INVALID_STATE", d, err)
		}
		c.Restart(t, "n2", apRestartArgs(n2)...)
		c.WaitFormed(t, 3, 60*time.Second)
		testutil.WaitFor(t, 30*time.Second, "the execution interrupted, on every node", func() error {
			for _, n := range all() {
				rec, err := apDo(http.MethodGet, n.URL+"/v1/executions/"+id, apAlice, "")
				if err != nil {
					return err
				}
				if rec.V.Status != "interrupted" {
					return fmt.Errorf("%s: %s", n.ID(), rec)
				}
			}
			return nil
		})
		for _, n := range all() {
			r := apCall(t, n, "pay", "hang-1")
			if r.Code != http.StatusConflict || r.V.Error.Code != "EXECUTION_UNCERTAIN" || r.V.Error.Status != "interrupted" {
				t.Fatalf("the retry on %s: %s; want 409 EXECUTION_UNCERTAIN, interrupted", n.ID(), r)
			}
		}
		if got := pay.runsOf("hang-1"); got != 1 {
			t.Fatalf("the tool ran %d times, want once", got)
		}
	})

	// All three stopped (SIGTERM) and started again on their data dirs:
	// the awaiting execution still awaits and runs once approved; the
	// denied one replays its denial.
	t.Run("full restart", func(t *testing.T) {
		w := apCall(t, node("n2"), "pay", "restart-wait")
		apAwaiting(t, "the call left awaiting", w, nil)
		dn := apCall(t, node("n3"), "pay", "restart-deny")
		apAwaiting(t, "the call to deny", dn, nil)
		if d, err := apDecide(node("n1"), apAdmin, dn.V.ExecutionID, "deny"); err != nil || d.Code != http.StatusOK || d.V.Status != "denied" {
			t.Fatalf("the admin denies: %v %v", d, err)
		}
		for _, n := range all() {
			if err := n.Stop(20 * time.Second); err != nil {
				t.Fatalf("SIGTERM of %s: %v", n.ID(), err)
			}
		}
		for _, n := range all() {
			m := c.Restart(t, n.ID(), apRestartArgs(n)...)
			// The node writes its log in batches (at most 50 ms late): poll.
			testutil.WaitUntil(t, 10*time.Second, "the restarted "+m.ID()+" to say it found its state", func() bool {
				return strings.Contains(m.Logs(), "existing_state=true")
			})
		}
		c.WaitFormed(t, 3, 60*time.Second)

		for _, n := range all() {
			apAwaiting(t, "the awaiting call's retry on "+n.ID()+" after the restart", apCall(t, n, "pay", "restart-wait"), &w)
			apReplayed(t, "the denied call's retry on "+n.ID()+" after the restart", apCall(t, n, "pay", "restart-deny"), dn.V.ExecutionID, "denied", "APPROVAL_DENIED", nil)
		}
		d, err := apDecide(node("n1"), apBob, w.V.ExecutionID, "approve")
		if err != nil || d.Code != http.StatusOK || d.V.Status != "completed" {
			t.Fatalf("bob approves after the restart: %v %v; want 200 completed", d, err)
		}
		for _, n := range all() {
			apReplayed(t, "the approved call's retry on "+n.ID(), apCall(t, n, "pay", "restart-wait"), w.V.ExecutionID, "completed", "", d.V.Data)
		}
		if got, never := pay.runsOf("restart-wait"), pay.runsOf("restart-deny"); got != 1 || never != 0 {
			t.Fatalf("the approved call ran %d times (want once), the denied one %d (want never)", got, never)
		}
	})
}

// gwWaitToolsAs waits until the node lists every tool of names to token.
func gwWaitToolsAs(t *testing.T, base, token string, names ...string) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, "the upstream tools listed", func() error {
		a, err := apDo(http.MethodGet, base+"/v1/tools", token, "")
		if err != nil {
			return err
		}
		var list struct{ Tools []struct{ Name string } }
		if err := json.Unmarshal([]byte(a.Raw), &list); err != nil {
			return err
		}
		for _, name := range names {
			found := false
			for _, tl := range list.Tools {
				found = found || tl.Name == name
			}
			if !found {
				return fmt.Errorf("%s not listed: %s", name, a.Raw)
			}
		}
		return nil
	})
}
