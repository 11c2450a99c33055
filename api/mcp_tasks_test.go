package api_test

// Tests of MCP tasks, cancelling and the reconcile tools (docs/mcp.md#long-calls-tasks, docs/mcp.md#cancelling, docs/mcp.md, "Reconciling from the model")
// through the API server and a real runtime, with raw JSON-RPC: what a
// client sends is spelt out, so the wire forms of 2025-11-25 and of the
// 2026-07-28 tasks extension are checked as the protocol writes them.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/mcp"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// rpc posts one JSON-RPC message to base/mcp at version as token (none
// when "") and returns the status and the decoded answer (nil for none).
func rpc(t *testing.T, base, token, version, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	if version >= v0728 {
		// The routing headers of 2026-07-28: the method, and the tool's
		// name or the task's id.
		var m struct {
			Method string
			Params struct{ Name, TaskID string }
		}
		_ = json.Unmarshal([]byte(body), &m)
		req.Header.Set("Mcp-Method", m.Method)
		if n := m.Params.Name + m.Params.TaskID; n != "" {
			req.Header.Set("Mcp-Name", n)
		}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) == 0 {
		return resp.StatusCode, nil
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST /mcp: %d, not JSON: %q", resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// result returns the result of an answer, failing the test on an error.
func result(t *testing.T, what string, msg map[string]any) map[string]any {
	t.Helper()
	res, ok := msg["result"].(map[string]any)
	if !ok {
		t.Fatalf("%s: no result: %v", what, msg)
	}
	return res
}

// jsonrpcCode returns the JSON-RPC error code of an answer, 0 for none.
func jsonrpcCode(msg map[string]any) int {
	e, _ := msg["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return int(c)
}

func metaOf(res map[string]any) map[string]any {
	m, _ := res["_meta"].(map[string]any)
	return m
}

const v1125, v0728 = mcpversion.V20251125, mcpversion.V20260728

// tasksExt is the _meta of a 2026-07-28 request that declares the tasks
// extension.
const tasksExt = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`

func TestMCPReconcileTools(t *testing.T) {
	started, unblock := make(chan string, 4), make(chan struct{})
	defer close(unblock)
	_, base := startOASNode(t, api.Config{Auth: oasAuth()}, blockTool(started, unblock))

	// Every principal lists them, whatever its allow-list.
	_, list := rpc(t, base, oasLimited, v1125, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	names := ""
	for _, tl := range result(t, "tools/list", list)["tools"].([]any) {
		names += tl.(map[string]any)["name"].(string) + " "
	}
	if names != "echo carmy.lookup carmy.cancel carmy.resolve " && !strings.Contains(names, "carmy.lookup") {
		t.Errorf("limited lists %q, want echo and the three reconcile tools", names)
	}
	for _, want := range []string{"echo", "carmy.lookup", "carmy.cancel", "carmy.resolve"} {
		if !strings.Contains(names, want+" ") {
			t.Errorf("limited lists %q: no %s", names, want)
		}
	}
	if strings.Contains(names, "block") {
		t.Errorf("limited lists %q: block is outside its allow-list", names)
	}

	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block","arguments":{"n":1},"_meta":{"carmy/request_id":"rc-1"}}}`
	done := make(chan map[string]any, 1)
	go func() {
		_, msg := rpc(t, base, oasAdmin, v1125, call)
		done <- msg
	}()
	<-started
	// The retry is uncertain, and its text says what to do.
	_, msg := rpc(t, base, oasAdmin, v1125, call)
	res := result(t, "retry", msg)
	text := res["content"].([]any)[0].(map[string]any)["text"].(string)
	if metaOf(res)["carmy/error_code"] != "EXECUTION_UNCERTAIN" || !strings.Contains(text, "Do not repeat it under a new carmy/request_id") ||
		!strings.Contains(text, "carmy.lookup") || !strings.Contains(text, "retry with the same carmy/request_id") {
		t.Errorf("uncertain retry: %v", res)
	}

	tool := func(token, name, args string) map[string]any {
		_, msg := rpc(t, base, token, v1125, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"`+name+`","arguments":`+args+`}}`)
		return result(t, name, msg)
	}
	looked := tool(oasAdmin, "carmy.lookup", `{"request_id":"rc-1"}`)
	sc, _ := looked["structuredContent"].(map[string]any)
	execID, _ := sc["execution_id"].(string)
	if looked["isError"] == true || sc["status"] != "running" || !strings.HasPrefix(execID, "exec_") {
		t.Fatalf("carmy.lookup: %v", looked)
	}
	// Another principal sees none of it.
	if r := tool(oasLimited, "carmy.lookup", `{"request_id":"rc-1"}`); metaOf(r)["carmy/error_code"] != "NOT_FOUND" {
		t.Errorf("carmy.lookup by another principal: %v", r)
	}
	if r := tool(oasLimited, "carmy.cancel", `{"execution_id":"`+execID+`"}`); metaOf(r)["carmy/error_code"] != "NOT_FOUND" {
		t.Errorf("carmy.cancel by another principal: %v", r)
	}
	if r := tool(oasAdmin, "carmy.lookup", `{"request_id":"rc-1","typo":1}`); metaOf(r)["carmy/error_code"] != "INVALID_REQUEST" {
		t.Errorf("carmy.lookup with an unknown argument: %v", r)
	}
	cancelled := tool(oasAdmin, "carmy.cancel", `{"execution_id":"`+execID+`"}`)
	if sc, _ := cancelled["structuredContent"].(map[string]any); sc["status"] != "cancelled" {
		t.Errorf("carmy.cancel: %v", cancelled)
	}
	select {
	case msg := <-done:
		if m := metaOf(result(t, "the cancelled call", msg)); m["carmy/status"] != "cancelled" {
			t.Errorf("the cancelled call answered %v", msg)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	if r := tool(oasAdmin, "carmy.resolve", `{"execution_id":"`+execID+`","status":"released"}`); metaOf(r)["carmy/error_code"] != "INVALID_STATE" {
		t.Errorf("carmy.resolve of a cancelled execution: %v", r)
	}
	// Not recorded: the identity's record is still the one execution.
	if r := tool(oasAdmin, "carmy.lookup", `{"request_id":"rc-1"}`); r["structuredContent"].(map[string]any)["execution_id"] != execID {
		t.Errorf("lookup after: %v", r)
	}
}

func TestMCPTasksCore(t *testing.T) {
	started, unblock := make(chan string, 4), make(chan struct{})
	_, base := startOASNode(t, api.Config{Auth: oasAuth()}, blockTool(started, unblock))

	_, init := rpc(t, base, oasAdmin, v1125, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	caps, _ := result(t, "initialize", init)["capabilities"].(map[string]any)
	tasks, _ := caps["tasks"].(map[string]any)
	if tasks["list"] == nil || tasks["cancel"] == nil || tasks["requests"] == nil {
		t.Errorf("initialize: capabilities %v, want tasks with list, cancel and requests", caps)
	}
	_, list := rpc(t, base, oasAdmin, v1125, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	for _, tl := range result(t, "tools/list", list)["tools"].([]any) {
		if ex, _ := tl.(map[string]any)["execution"].(map[string]any); ex["taskSupport"] != "optional" {
			t.Errorf("tools/list: %v has no execution.taskSupport optional", tl)
		}
	}

	// A task-augmented call is answered with its task once reserved.
	begin := time.Now()
	_, created := rpc(t, base, oasAdmin, v1125, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"block","arguments":{"n":1},"task":{"ttl":60000}}}`)
	took := time.Since(begin)
	tk, _ := result(t, "task call", created)["task"].(map[string]any)
	id, _ := tk["taskId"].(string)
	if !strings.HasPrefix(id, "exec_") || tk["status"] != "working" || tk["createdAt"] == nil || tk["lastUpdatedAt"] == nil {
		t.Fatalf("task call: %v", created)
	}
	if _, ok := tk["ttl"]; !ok || tk["ttl"] != nil {
		t.Errorf("task ttl = %v, want null", tk["ttl"])
	}
	t.Logf("a task of a blocking tool answered in %v", took)
	<-started

	get := func(token, method, taskID string) map[string]any {
		_, msg := rpc(t, base, token, v1125, `{"jsonrpc":"2.0","id":4,"method":"`+method+`","params":{"taskId":"`+taskID+`"}}`)
		return msg
	}
	if r := result(t, "tasks/get", get(oasAdmin, "tasks/get", id)); r["status"] != "working" || r["taskId"] != id {
		t.Errorf("tasks/get: %v", r)
	}
	// A principal sees only its own tasks.
	if code := jsonrpcCode(get(oasLimited, "tasks/get", id)); code != -32602 {
		t.Errorf("tasks/get by another principal: code %d, want -32602", code)
	}
	if code := jsonrpcCode(get(oasAdmin, "tasks/get", "exec_nosuch")); code != -32602 {
		t.Errorf("tasks/get of no task: code %d, want -32602", code)
	}
	_, listed := rpc(t, base, oasAdmin, v1125, `{"jsonrpc":"2.0","id":5,"method":"tasks/list"}`)
	if ts, _ := result(t, "tasks/list", listed)["tasks"].([]any); len(ts) == 0 || ts[0].(map[string]any)["taskId"] != id {
		t.Errorf("tasks/list: %v", listed)
	}
	_, other := rpc(t, base, oasLimited, v1125, `{"jsonrpc":"2.0","id":5,"method":"tasks/list"}`)
	if ts, _ := result(t, "tasks/list", other)["tasks"].([]any); len(ts) != 0 {
		t.Errorf("tasks/list of another principal: %v", other)
	}

	// tasks/result waits for the end.
	got := make(chan map[string]any, 1)
	go func() { got <- get(oasAdmin, "tasks/result", id) }()
	close(unblock)
	select {
	case msg := <-got:
		r := result(t, "tasks/result", msg)
		rel, _ := metaOf(r)["io.modelcontextprotocol/related-task"].(map[string]any)
		if r["isError"] == true || rel["taskId"] != id || metaOf(r)["carmy/execution_id"] != id ||
			r["structuredContent"].(map[string]any)["unblocked"] != true {
			t.Errorf("tasks/result: %v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tasks/result did not return")
	}
	if r := result(t, "tasks/get", get(oasAdmin, "tasks/get", id)); r["status"] != "completed" {
		t.Errorf("tasks/get after: %v", r)
	}
	if code := jsonrpcCode(get(oasAdmin, "tasks/cancel", id)); code != -32602 {
		t.Errorf("tasks/cancel of a completed task: code %d, want -32602", code)
	}

	// A task without request_id is recorded under its execution id: the
	// same call again is a new task; with a request_id, a retry is the
	// same task.
	_, a := rpc(t, base, oasAdmin, v1125, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"x":1},"task":{},"_meta":{"carmy/request_id":"tk-1"}}}`)
	// The task is answered once reserved: the retry comes once it ran.
	if first, _ := result(t, "a", a)["task"].(map[string]any); first != nil {
		firstID, _ := first["taskId"].(string)
		wait.Until(t, 30*time.Second, "the first task to complete", func() bool {
			r, _ := get(oasAdmin, "tasks/get", firstID)["result"].(map[string]any)
			return r["status"] == "completed"
		})
	}
	_, b := rpc(t, base, oasAdmin, v1125, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"x":1},"task":{},"_meta":{"carmy/request_id":"tk-1"}}}`)
	ta, tb := result(t, "a", a)["task"].(map[string]any), result(t, "b", b)["task"].(map[string]any)
	if ta["taskId"] != tb["taskId"] || tb["status"] != "completed" {
		t.Errorf("a retry of a task call: %v then %v", ta, tb)
	}
	// An unknown tool is -32602, as for any call.
	_, unknown := rpc(t, base, oasAdmin, v1125, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"nosuch","task":{}}}`)
	if code := jsonrpcCode(unknown); code != -32602 {
		t.Errorf("a task of an unknown tool: %v", unknown)
	}
}

func TestMCPTaskCancel(t *testing.T) {
	started, unblock := make(chan string, 4), make(chan struct{})
	defer close(unblock)
	_, base := startOASNode(t, api.Config{}, blockTool(started, unblock))
	_, created := rpc(t, base, "", v1125, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","task":{}}}`)
	id := result(t, "task call", created)["task"].(map[string]any)["taskId"].(string)
	<-started
	_, msg := rpc(t, base, "", v1125, `{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{"taskId":"`+id+`"}}`)
	if r := result(t, "tasks/cancel", msg); r["status"] != "cancelled" || r["taskId"] != id {
		t.Errorf("tasks/cancel: %v", r)
	}
	_, msg = rpc(t, base, "", v1125, `{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"`+id+`"}}`)
	if r := result(t, "tasks/result", msg); r["isError"] != true || metaOf(r)["carmy/status"] != "cancelled" {
		t.Errorf("tasks/result of a cancelled task: %v", r)
	}
}

func TestMCPTasksExtension(t *testing.T) {
	started, unblock := make(chan string, 4), make(chan struct{})
	_, base := startOASNode(t, api.Config{}, blockTool(started, unblock))

	_, created := rpc(t, base, "", v0728, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"block","_meta":{`+tasksExt+`}}}`)
	r := result(t, "task call", created)
	id, _ := r["taskId"].(string)
	if r["resultType"] != "task" || r["status"] != "working" || !strings.HasPrefix(id, "exec_") || r["pollIntervalMs"] == nil {
		t.Fatalf("task call at 2026-07-28: %v", r)
	}
	if v, ok := r["ttlMs"]; !ok || v != nil {
		t.Errorf("ttlMs = %v, want null", v)
	}
	<-started
	get := func(method, meta string) map[string]any {
		_, msg := rpc(t, base, "", v0728, `{"jsonrpc":"2.0","id":2,"method":"`+method+`","params":{"taskId":"`+id+`","_meta":{`+meta+`}}}`)
		return msg
	}
	if code := jsonrpcCode(get("tasks/get", `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`)); code != -32021 {
		t.Errorf("tasks/get without the extension: code %d, want -32021", code)
	}
	if r := result(t, "tasks/get", get("tasks/get", tasksExt)); r["status"] != "working" || r["resultType"] != "complete" {
		t.Errorf("tasks/get: %v", r)
	}
	// Without the extension, a call is answered with its result.
	_, plain := rpc(t, base, "", v0728, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"a":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	if r := result(t, "plain call", plain); r["resultType"] == "task" || r["structuredContent"] == nil {
		t.Errorf("a call without the extension: %v", r)
	}
	close(unblock)
	wait.For(t, 30*time.Second, "the task to complete", func() error {
		r := result(t, "tasks/get", get("tasks/get", tasksExt))
		if r["status"] != "completed" {
			return fmt.Errorf("%v", r)
		}
		inner, _ := r["result"].(map[string]any)
		if inner["structuredContent"].(map[string]any)["unblocked"] != true || inner["isError"] == true {
			t.Errorf("completed task: %v", r)
		}
		return nil
	})
	if r := result(t, "tasks/cancel", get("tasks/cancel", tasksExt)); r["resultType"] != "complete" || len(r) != 1 {
		t.Errorf("tasks/cancel at 2026-07-28: %v, want an empty acknowledgement", r)
	}
	if r := result(t, "tasks/update", get("tasks/update", tasksExt)); r["resultType"] != "complete" {
		t.Errorf("tasks/update: %v", r)
	}
	// A failed tool is a completed task with an isError result.
	_, failed := rpc(t, base, "", v0728, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fail","_meta":{`+tasksExt+`}}}`)
	fr := result(t, "fail", failed)
	if fr["resultType"] == "task" {
		fid := fr["taskId"].(string)
		for {
			_, msg := rpc(t, base, "", v0728, `{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":"`+fid+`","_meta":{`+tasksExt+`}}}`)
			fr = result(t, "tasks/get", msg)
			if fr["status"] != "working" {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if inner, _ := fr["result"].(map[string]any); fr["status"] != "completed" || inner["isError"] != true {
			t.Errorf("a failed tool's task: %v", fr)
		}
	}
}

func TestMCPNotificationsCancelled(t *testing.T) {
	started, unblock := make(chan string, 4), make(chan struct{})
	defer close(unblock)
	_, base := startOASNode(t, api.Config{Auth: oasAuth()}, blockTool(started, unblock))
	for _, tc := range []struct{ name, meta string }{{"recorded", `,"_meta":{"carmy/request_id":"nc-1","carmy/session_id":"s"}`}, {"unrecorded", `,"_meta":{"carmy/session_id":"s"}`}} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan map[string]any, 1)
			go func() {
				_, msg := rpc(t, base, oasAdmin, v1125, `{"jsonrpc":"2.0","id":"c-7","method":"tools/call","params":{"name":"block"`+tc.meta+`}}`)
				done <- msg
			}()
			<-started
			// Another principal, or another session, cancels nothing.
			cancel := func(token, session string) {
				status, _ := rpc(t, base, token, v1125, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c-7","_meta":{"carmy/session_id":"`+session+`"}}}`)
				if status != http.StatusAccepted {
					t.Errorf("notifications/cancelled: %d", status)
				}
			}
			cancel(oasLimited, "s")
			cancel(oasAdmin, "other")
			select {
			case msg := <-done:
				t.Fatalf("cancelled by a stranger: %v", msg)
			case <-time.After(100 * time.Millisecond):
			}
			cancel(oasAdmin, "s")
			select {
			case msg := <-done:
				if m := metaOf(result(t, "the cancelled call", msg)); m["carmy/status"] != "cancelled" {
					t.Errorf("the cancelled call: %v", msg)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("notifications/cancelled did not cancel the call")
			}
		})
	}
}

// TestMCPTasksListCursor checks issue 39 item 4.4: a tasks/list cursor
// is opaque — not the position of its task in the cluster's global
// sequence, which would tell a tenant how many calls the others make —
// yet pages through every task of the caller once; a cursor that is not
// one tasks/list gave (an old numeric one, garbage, a task that is not
// the caller's or does not exist) is -32602.
func TestMCPTasksListCursor(t *testing.T) {
	app, base := startOASNode(t, api.Config{Auth: oasAuth()})
	call := func(token, rid string) {
		t.Helper()
		_, msg := rpc(t, base, token, v1125, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"carmy/request_id":"`+rid+`"}}}`)
		if res := result(t, "echo "+rid, msg); res["isError"] == true {
			t.Fatalf("echo %s: %v", rid, res)
		}
	}
	type page struct {
		ids  []string
		next string
		code int
	}
	list := func(token string, cursor *string) page {
		t.Helper()
		params := ""
		if cursor != nil {
			params = `,"params":{"cursor":"` + *cursor + `"}`
		}
		_, msg := rpc(t, base, token, v1125, `{"jsonrpc":"2.0","id":2,"method":"tasks/list"`+params+`}`)
		if code := jsonrpcCode(msg); code != 0 {
			return page{code: code}
		}
		res := result(t, "tasks/list", msg)
		var p page
		p.next, _ = res["nextCursor"].(string)
		tasks, _ := res["tasks"].([]any)
		for _, tk := range tasks {
			id, _ := tk.(map[string]any)["taskId"].(string)
			p.ids = append(p.ids, id)
		}
		return p
	}
	// Others' calls move the global sequence.
	for i := range 7 {
		call(oasAdmin, fmt.Sprintf("admin-%d", i))
	}
	const total = mcp.TaskListLimit + 3
	for i := range total {
		call(oasPlanner, fmt.Sprintf("planner-%d", i))
	}

	first := list(oasPlanner, nil)
	if len(first.ids) != mcp.TaskListLimit || first.next == "" {
		t.Fatalf("first page: %d tasks, nextCursor %q; want %d and a cursor", len(first.ids), first.next, mcp.TaskListLimit)
	}
	last, err := app.Execution(t.Context(), engine.Caller{Principal: api.AdminPrincipal, Admin: true}, first.ids[len(first.ids)-1])
	if err != nil {
		t.Fatal(err)
	}
	seq := strconv.FormatUint(last.Seq, 10)
	raw, _ := base64.RawURLEncoding.DecodeString(first.next)
	_, numeric := strconv.ParseUint(first.next, 10, 64)
	_, rawNumeric := strconv.ParseUint(string(raw), 10, 64)
	if first.next == seq || string(raw) == seq || numeric == nil || rawNumeric == nil {
		t.Errorf("nextCursor %q (%q decoded) is a number: the global sequence of the page's last task is %s", first.next, raw, seq)
	}

	second := list(oasPlanner, &first.next)
	if second.code != 0 || len(second.ids) != total-mcp.TaskListLimit || second.next != "" {
		t.Fatalf("second page: %+v, want the %d oldest tasks and no cursor", second, total-mcp.TaskListLimit)
	}
	seen := make(map[string]bool)
	for _, id := range append(first.ids, second.ids...) {
		seen[id] = true
	}
	if len(seen) != total {
		t.Errorf("two pages hold %d distinct tasks, want %d", len(seen), total)
	}

	// Another principal cannot page with the planner's cursor.
	if p := list(oasLimited, &first.next); p.code != -32602 {
		t.Errorf("the planner's cursor used by another principal: %+v, want -32602", p)
	}
	for _, bad := range []string{"", "garbage!", seq, "1", base64.RawURLEncoding.EncodeToString([]byte("t1:exec_nosuch"))} {
		if p := list(oasPlanner, &bad); p.code != -32602 {
			t.Errorf("cursor %q: %+v, want -32602", bad, p)
		}
	}
}
