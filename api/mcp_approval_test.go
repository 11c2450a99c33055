package api_test

// Approval gates over MCP (docs/mcp.md#approval-gates-and-tasks): a gated
// call made as a task is input_required until a person decides, at
// 2025-11-25 and at 2026-07-28, with raw JSON-RPC (the go-sdk has no
// tasks); a client without tasks (the go-sdk's) is told APPROVAL_PENDING
// and comes back with the same request_id.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// decideHTTP posts verb (approve or deny) on execution id as the admin,
// over the HTTP API, and returns the status and the record answered.
func decideHTTP(t *testing.T, base, id, verb string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/executions/"+id+"/"+verb, strings.NewReader(`{"reason":"test"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+oasAdmin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// countedGatedTool is gatedTool counting its runs.
func countedGatedTool(runs *atomic.Int64) carmy.ToolSpec {
	spec := gatedTool()
	spec.Func = func(ctx context.Context, call carmy.Call) (any, error) {
		runs.Add(1)
		return map[string]any{"paid": true}, nil
	}
	return spec
}

// quickGatedTool needs approval within a second.
func quickGatedTool() carmy.ToolSpec {
	return carmy.ToolSpec{
		Name:     "quickgated",
		Approval: &engine.Approval{Approvers: []string{"limited"}, ExpiresAfter: time.Second},
		Func: func(ctx context.Context, call carmy.Call) (any, error) {
			return map[string]any{"paid": true}, nil
		},
	}
}

// wantAwaitingTask checks a task awaiting approval: input_required, its
// statusMessage naming the execution and the approver's part.
func wantAwaitingTask(t *testing.T, what string, tk map[string]any) string {
	t.Helper()
	id, _ := tk["taskId"].(string)
	msg, _ := tk["statusMessage"].(string)
	if !strings.HasPrefix(id, "exec_") || tk["status"] != "input_required" || !strings.Contains(msg, id) || !strings.Contains(msg, "approver") {
		t.Fatalf("%s: %v, want an input_required task whose statusMessage names it and the approver", what, tk)
	}
	return id
}

func TestMCPApprovalTasksCore(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	_, base := startOASNode(t, api.Config{Auth: oasAuth()}, countedGatedTool(&runs), quickGatedTool())
	call := func(tool, rid string) map[string]any {
		_, msg := rpc(t, base, oasPlanner, v1125, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+
			`","arguments":{"amount":5},"task":{},"_meta":{"carmy/request_id":"`+rid+`"}}}`)
		tk, _ := result(t, "gated task call", msg)["task"].(map[string]any)
		return tk
	}
	method := func(m, id string) map[string]any {
		_, msg := rpc(t, base, oasPlanner, v1125, `{"jsonrpc":"2.0","id":2,"method":"`+m+`","params":{"taskId":"`+id+`"}}`)
		return msg
	}

	// Approved: input_required while it awaits (polled, and the call
	// retried), then the tool's result from tasks/result.
	id := wantAwaitingTask(t, "task call", call("gated", "mat-1"))
	wantAwaitingTask(t, "tasks/get", result(t, "tasks/get", method("tasks/get", id)))
	if again := wantAwaitingTask(t, "retried call", call("gated", "mat-1")); again != id {
		t.Errorf("the retried call is task %s, want %s", again, id)
	}
	if code := jsonrpcCode(method("tasks/cancel", id)); code != -32602 {
		t.Errorf("tasks/cancel of a task awaiting approval: code %d, want -32602", code)
	}
	got := make(chan map[string]any, 1)
	go func() { got <- method("tasks/result", id) }()
	if st, rec := decideHTTP(t, base, id, "approve"); st != http.StatusOK || rec["status"] != "completed" {
		t.Fatalf("approve: %d %v", st, rec)
	}
	select {
	case msg := <-got:
		r := result(t, "tasks/result", msg)
		sc, _ := r["structuredContent"].(map[string]any)
		if r["isError"] == true || sc["paid"] != true || metaOf(r)["carmy/execution_id"] != id {
			t.Errorf("tasks/result after approval: %v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tasks/result did not return after the approval")
	}
	if r := result(t, "tasks/get", method("tasks/get", id)); r["status"] != "completed" {
		t.Errorf("tasks/get after approval: %v", r)
	}
	// Retried after the approval, the call is its finished task: one run.
	if r := call("gated", "mat-1"); r["taskId"] != id || r["status"] != "completed" || runs.Load() != 1 {
		t.Errorf("the call retried after approval: %v, with %d runs; want the completed task and one run", r, runs.Load())
	}

	// Denied: failed, its result the APPROVAL_DENIED error.
	denied := wantAwaitingTask(t, "task call", call("gated", "mat-2"))
	if st, rec := decideHTTP(t, base, denied, "deny"); st != http.StatusOK || rec["status"] != "denied" {
		t.Fatalf("deny: %d %v", st, rec)
	}
	if r := result(t, "tasks/get", method("tasks/get", denied)); r["status"] != "failed" || r["statusMessage"] == "" {
		t.Errorf("tasks/get after denial: %v", r)
	}
	r := result(t, "tasks/result", method("tasks/result", denied))
	sc, _ := r["structuredContent"].(map[string]any)
	if e, _ := sc["error"].(map[string]any); r["isError"] != true || e["code"] != "APPROVAL_DENIED" || metaOf(r)["carmy/status"] != "denied" {
		t.Errorf("tasks/result after denial: %v", r)
	}

	// Expired: no one decides within a second.
	expired := wantAwaitingTask(t, "task call", call("quickgated", "mat-3"))
	wait.Until(t, 30*time.Second, "the gate to expire", func() bool {
		return result(t, "tasks/get", method("tasks/get", expired))["status"] == "failed"
	})
	r = result(t, "tasks/result", method("tasks/result", expired))
	sc, _ = r["structuredContent"].(map[string]any)
	if e, _ := sc["error"].(map[string]any); r["isError"] != true || e["code"] != "APPROVAL_EXPIRED" || metaOf(r)["carmy/status"] != "expired" {
		t.Errorf("tasks/result after expiry: %v", r)
	}
}

func TestMCPApprovalTasksExtension(t *testing.T) {
	var runs atomic.Int64
	_, base := startOASNode(t, api.Config{Auth: oasAuth()}, countedGatedTool(&runs))
	call := func(rid string) map[string]any {
		_, msg := rpc(t, base, oasPlanner, v0728, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"gated","arguments":{"amount":5},"_meta":{`+
			tasksExt+`,"carmy/request_id":"`+rid+`"}}}`)
		return result(t, "gated task call", msg)
	}
	get := func(id string) map[string]any {
		_, msg := rpc(t, base, oasPlanner, v0728, `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"`+id+`","_meta":{`+tasksExt+`}}}`)
		return result(t, "tasks/get", msg)
	}
	created := call("mae-1")
	id := wantAwaitingTask(t, "task call", created)
	if ir, ok := created["inputRequests"].(map[string]any); created["resultType"] != "task" || !ok || len(ir) != 0 {
		t.Errorf("task call: %v, want resultType task and an empty inputRequests", created)
	}
	polled := get(id)
	wantAwaitingTask(t, "tasks/get", polled)
	if ir, ok := polled["inputRequests"].(map[string]any); polled["resultType"] != "complete" || !ok || len(ir) != 0 || polled["result"] != nil {
		t.Errorf("tasks/get: %v, want resultType complete, an empty inputRequests, no result", polled)
	}
	if st, rec := decideHTTP(t, base, id, "approve"); st != http.StatusOK || rec["status"] != "completed" {
		t.Fatalf("approve: %d %v", st, rec)
	}
	done := get(id)
	inner, _ := done["result"].(map[string]any)
	if sc, _ := inner["structuredContent"].(map[string]any); done["status"] != "completed" || inner["isError"] == true || sc["paid"] != true {
		t.Errorf("tasks/get after approval: %v", done)
	}
	if r := call("mae-1"); r["resultType"] == "task" || r["isError"] == true || runs.Load() != 1 {
		t.Errorf("the call retried after approval: %v, with %d runs; want its result and one run", r, runs.Load())
	}

	// Denied: completed with the isError result, as a failed tool is at
	// this version.
	denied := wantAwaitingTask(t, "task call", call("mae-2"))
	if st, _ := decideHTTP(t, base, denied, "deny"); st != http.StatusOK {
		t.Fatalf("deny: %d", st)
	}
	after := get(denied)
	inner, _ = after["result"].(map[string]any)
	sc, _ := inner["structuredContent"].(map[string]any)
	if e, _ := sc["error"].(map[string]any); after["status"] != "completed" || inner["isError"] != true || e["code"] != "APPROVAL_DENIED" {
		t.Errorf("tasks/get after denial: %v", after)
	}
	// The call retried after the decision is answered with the result.
	if r := call("mae-2"); r["resultType"] == "task" || r["isError"] != true {
		t.Errorf("the denied call retried: %v", r)
	}
}

// TestMCPApprovalPendingSDK: a client without tasks (the go-sdk's) is
// told APPROVAL_PENDING with the execution_id; once an admin approved
// over HTTP, the same request_id answers the tool's result.
func TestMCPApprovalPendingSDK(t *testing.T) {
	_, base := startOASNode(t, api.Config{Auth: oasAuth()}, gatedTool())
	client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "v1"}, nil)
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{oasPlanner}}}, &sdk.ClientSessionOptions{ProtocolVersion: v1125})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	params := &sdk.CallToolParams{Name: "gated", Arguments: map[string]any{"amount": 5}, Meta: sdk.Meta{"carmy/request_id": "mas-1"}}
	pending, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := pending.StructuredContent.(map[string]any)
	e, _ := sc["error"].(map[string]any)
	id, _ := e["execution_id"].(string)
	if !pending.IsError || e["code"] != "APPROVAL_PENDING" || !strings.HasPrefix(id, "exec_") || pending.Meta["carmy/status"] != "awaiting_approval" {
		t.Fatalf("gated call: %+v", pending)
	}
	if st, _ := decideHTTP(t, base, id, "approve"); st != http.StatusOK {
		t.Fatalf("approve: %d", st)
	}
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	sc, _ = res.StructuredContent.(map[string]any)
	if res.IsError || sc["paid"] != true || res.Meta["carmy/replayed"] != true || res.Meta["carmy/execution_id"] != id {
		t.Errorf("the call after approval: %+v", res)
	}
}
