package guarantees_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	m3client "github.com/mark3labs/mcp-go/client"
	m3transport "github.com/mark3labs/mcp-go/client/transport"
	m3 "github.com/mark3labs/mcp-go/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/internal/mcpversion"
)

// call is one call of a cell: tool, arguments, request_id and an
// optional timeout_ms.
type call struct {
	Tool      string
	Args      map[string]any
	RID       string
	TimeoutMS int
}

// caller is one client of one node, speaking one route's protocol.
type caller interface {
	// call sends c and waits for its outcome: the answer (a result or a
	// refusal); a task is followed until it ends or is interrupted.
	call(ctx context.Context, c call) (answer, error)
	// retry sends c once and returns what the identity answers now (a
	// task: its state, without waiting for it to end).
	retry(ctx context.Context, c call) (answer, error)
	// cancel and resolve reconcile execution id the route's own way.
	cancel(ctx context.Context, id string) (answer, error)
	resolve(ctx context.Context, id string, body map[string]any) (answer, error)
	close()
}

// route is one way a call reaches a node, and the tools it calls.
type route struct {
	name string
	kind toolKind
	// abortCancels: a client that gives up on a call mid-way cancels its
	// execution (MCP 2026-07-28, and clients that send
	// notifications/cancelled); otherwise the tool runs to its end.
	abortCancels bool
	// sameTask: a retry of a finished call answers the same task, whose
	// result is the call's own (not flagged replayed): 2025-11-25 tasks.
	sameTask bool
	open     func(base string) (caller, error)
}

var httpClient = &http.Client{Timeout: 90 * time.Second}

// --- the HTTP API -----------------------------------------------------

type httpCaller struct{ base string }

func openHTTP(base string) (caller, error) { return httpCaller{base}, nil }

func (h httpCaller) post(ctx context.Context, path string, body any) (answer, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+path, bytes.NewReader(raw))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return httpAnswer(resp.StatusCode, out), nil
}

func (h httpCaller) call(ctx context.Context, c call) (answer, error) {
	body := map[string]any{"tool": c.Tool, "arguments": c.Args}
	if c.RID != "" {
		body["request_id"] = c.RID
	}
	if c.TimeoutMS > 0 {
		body["timeout_ms"] = c.TimeoutMS
	}
	return h.post(ctx, "/v1/tools/call", body)
}

func (h httpCaller) retry(ctx context.Context, c call) (answer, error) { return h.call(ctx, c) }

func (h httpCaller) cancel(ctx context.Context, id string) (answer, error) {
	return h.post(ctx, "/v1/executions/"+url.PathEscape(id)+"/cancel", map[string]any{})
}

func (h httpCaller) resolve(ctx context.Context, id string, body map[string]any) (answer, error) {
	return h.post(ctx, "/v1/executions/"+url.PathEscape(id)+"/resolve", body)
}

func (httpCaller) close() {}

// lookup is GET /v1/executions?request_id=…: the identity's record (a
// result with its status) or NOT_FOUND. Cells check records this way,
// whatever route made the call.
func lookup(ctx context.Context, base, rid string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/executions?request_id="+url.QueryEscape(rid), nil)
	if err != nil {
		return answer{}, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return httpAnswer(resp.StatusCode, out), nil
}

// --- MCP: the reconcile tools and _meta, common to every MCP client ----

func mcpMeta(c call) map[string]any {
	meta := map[string]any{}
	if c.RID != "" {
		meta["carmy/request_id"] = c.RID
	}
	if c.TimeoutMS > 0 {
		meta["carmy/timeout_ms"] = c.TimeoutMS
	}
	return meta
}

// toolCaller is what an MCP client must do for the reconcile tools.
type toolCaller interface {
	callTool(ctx context.Context, name string, args, meta map[string]any) (answer, error)
}

func reconcileCancel(ctx context.Context, tc toolCaller, id string) (answer, error) {
	return tc.callTool(ctx, "carmy.cancel", map[string]any{"execution_id": id}, nil)
}

func reconcileResolve(ctx context.Context, tc toolCaller, id string, body map[string]any) (answer, error) {
	args := map[string]any{"execution_id": id}
	for k, v := range body {
		args[k] = v
	}
	return tc.callTool(ctx, "carmy.resolve", args, nil)
}

// --- the official Go SDK ----------------------------------------------

type sdkCaller struct{ cs *sdk.ClientSession }

func openSDK(version string) func(base string) (caller, error) {
	return func(base string) (caller, error) {
		c := sdk.NewClient(&sdk.Implementation{Name: "carmy-guarantees-go-sdk", Version: "v1"}, nil)
		tr := &sdk.StreamableClientTransport{Endpoint: base + "/mcp", DisableStandaloneSSE: true}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cs, err := c.Connect(ctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			return nil, fmt.Errorf("go-sdk %s: connect: %w", version, err)
		}
		if got := cs.InitializeResult().ProtocolVersion; got != version {
			cs.Close()
			return nil, fmt.Errorf("go-sdk: negotiated %s, want %s", got, version)
		}
		return sdkCaller{cs}, nil
	}
}

func (s sdkCaller) callTool(ctx context.Context, name string, args, meta map[string]any) (answer, error) {
	res, err := s.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args, Meta: meta})
	return clientResult(ctx, res, err)
}

func (s sdkCaller) call(ctx context.Context, c call) (answer, error) {
	return s.callTool(ctx, c.Tool, c.Args, mcpMeta(c))
}
func (s sdkCaller) retry(ctx context.Context, c call) (answer, error) { return s.call(ctx, c) }
func (s sdkCaller) cancel(ctx context.Context, id string) (answer, error) {
	return reconcileCancel(ctx, s, id)
}
func (s sdkCaller) resolve(ctx context.Context, id string, body map[string]any) (answer, error) {
	return reconcileResolve(ctx, s, id, body)
}
func (s sdkCaller) close() { s.cs.Close() }

// --- mark3labs/mcp-go, an independent implementation ---------------------

type m3Caller struct{ c *m3client.Client }

func openM3(version string) func(base string) (caller, error) {
	return func(base string) (caller, error) {
		tr, err := m3transport.NewStreamableHTTP(base + "/mcp")
		if err != nil {
			return nil, err
		}
		c := m3client.NewClient(tr, m3client.WithProtocolVersion(version))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Start(ctx); err != nil {
			return nil, fmt.Errorf("mcp-go %s: start: %w", version, err)
		}
		init := m3.InitializeRequest{}
		init.Params.ProtocolVersion = version
		init.Params.ClientInfo = m3.Implementation{Name: "carmy-guarantees-mcp-go", Version: "v1"}
		res, err := c.Initialize(ctx, init)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("mcp-go %s: initialize: %w", version, err)
		}
		if res.ProtocolVersion != version {
			c.Close()
			return nil, fmt.Errorf("mcp-go: negotiated %s, want %s", res.ProtocolVersion, version)
		}
		return m3Caller{c}, nil
	}
}

func (m m3Caller) callTool(ctx context.Context, name string, args, meta map[string]any) (answer, error) {
	req := m3.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	if meta != nil {
		req.Params.Meta = &m3.Meta{AdditionalFields: meta}
	}
	res, err := m.c.CallTool(ctx, req)
	return clientResult(ctx, res, err)
}

// clientResult is an MCP client library's tools/call answer as an answer:
// its result, or an error the server answered (a JSON-RPC error) — but a
// transport error once ctx has ended, which the cell must not read as the
// server's answer.
func clientResult(ctx context.Context, res any, err error) (answer, error) {
	if err != nil {
		if ctx.Err() != nil {
			return answer{}, err
		}
		return rpcError(0, err.Error()), nil
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return answer{}, err
	}
	return mcpResult(raw), nil
}

func (m m3Caller) call(ctx context.Context, c call) (answer, error) {
	return m.callTool(ctx, c.Tool, c.Args, mcpMeta(c))
}
func (m m3Caller) retry(ctx context.Context, c call) (answer, error) { return m.call(ctx, c) }
func (m m3Caller) cancel(ctx context.Context, id string) (answer, error) {
	return reconcileCancel(ctx, m, id)
}
func (m m3Caller) resolve(ctx context.Context, id string, body map[string]any) (answer, error) {
	return reconcileResolve(ctx, m, id, body)
}
func (m m3Caller) close() { m.c.Close() }

// --- MCP tasks, as raw JSON-RPC: the wire forms spelt out ----------------

// taskCaller makes task-augmented calls at 2025-11-25 (tasks in the core
// protocol) or 2026-07-28 (the tasks extension).
type taskCaller struct {
	base, version string
	id            atomic.Int64
}

const v20251125, v20260728 = mcpversion.V20251125, mcpversion.V20260728

func openTasks(version string) func(base string) (caller, error) {
	return func(base string) (caller, error) { return &taskCaller{base: base, version: version}, nil }
}

// rpc sends one request and returns its result, or an answer for a
// JSON-RPC error.
func (tc *taskCaller) rpc(ctx context.Context, method string, params map[string]any) (json.RawMessage, *answer, error) {
	if tc.version == v20260728 {
		meta, _ := params["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta["io.modelcontextprotocol/protocolVersion"] = v20260728
		meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
		params["_meta"] = meta
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": tc.id.Add(1), "method": method, "params": params})
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tc.base+"/mcp", bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", tc.version)
	if tc.version == v20260728 {
		req.Header.Set("Mcp-Method", method)
		if n, _ := params["name"].(string); n != "" {
			req.Header.Set("Mcp-Name", n)
		} else if n, _ := params["taskId"].(string); n != "" {
			req.Header.Set("Mcp-Name", n)
		}
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		return nil, nil, fmt.Errorf("%s: %d %q: %w", method, resp.StatusCode, raw, err)
	}
	if msg.Error != nil {
		a := rpcError(msg.Error.Code, msg.Error.Message)
		return nil, &a, nil
	}
	return msg.Result, nil, nil
}

type taskState struct {
	TaskID        string          `json:"taskId"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"statusMessage"`
	ResultType    string          `json:"resultType"`
	Result        json.RawMessage `json:"result"`
}

// start sends the task-augmented call: the task, or the answer when the
// call was answered without one (a refusal; at 2026-07-28, a retry of a
// finished call).
func (tc *taskCaller) start(ctx context.Context, c call) (*taskState, answer, error) {
	params := map[string]any{"name": c.Tool, "arguments": c.Args, "_meta": mcpMeta(c)}
	if tc.version == v20251125 {
		params["task"] = map[string]any{"ttl": 600000}
	}
	res, rpcErr, err := tc.rpc(ctx, "tools/call", params)
	if err != nil || rpcErr != nil {
		return nil, deref(rpcErr), err
	}
	var wrapped struct {
		Task *taskState `json:"task"`
		taskState
	}
	if err := json.Unmarshal(res, &wrapped); err != nil {
		return nil, answer{}, err
	}
	switch {
	case wrapped.Task != nil:
		return wrapped.Task, answer{}, nil
	case wrapped.ResultType == "task":
		return &wrapped.taskState, answer{}, nil
	}
	return nil, mcpResult(res), nil
}

// state is the task's state as an answer: uncertain while working (its
// statusMessage says interrupted), else the call's result.
func (tc *taskCaller) state(ctx context.Context, id string) (answer, bool, error) {
	res, rpcErr, err := tc.rpc(ctx, "tasks/get", map[string]any{"taskId": id})
	if err != nil || rpcErr != nil {
		return deref(rpcErr), true, err
	}
	var st taskState
	if err := json.Unmarshal(res, &st); err != nil {
		return answer{}, true, err
	}
	if st.Status == "working" {
		status := "running"
		if strings.HasPrefix(st.StatusMessage, "interrupted") {
			status = "interrupted"
		}
		return answer{Code: "EXECUTION_UNCERTAIN", Status: status, ExecutionID: id, Raw: string(res)}, status == "interrupted", nil
	}
	if len(st.Result) > 0 {
		return mcpResult(st.Result), true, nil
	}
	out, rpcErr, err := tc.rpc(ctx, "tasks/result", map[string]any{"taskId": id})
	if err != nil || rpcErr != nil {
		return deref(rpcErr), true, err
	}
	return mcpResult(out), true, nil
}

func (tc *taskCaller) call(ctx context.Context, c call) (answer, error) {
	task, a, err := tc.start(ctx, c)
	if err != nil || task == nil {
		return a, err
	}
	for {
		a, done, err := tc.state(ctx, task.TaskID)
		if err != nil || done {
			return a, err
		}
		select {
		case <-ctx.Done():
			return answer{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (tc *taskCaller) retry(ctx context.Context, c call) (answer, error) {
	task, a, err := tc.start(ctx, c)
	if err != nil || task == nil {
		return a, err
	}
	a, _, err = tc.state(ctx, task.TaskID)
	return a, err
}

func (tc *taskCaller) cancel(ctx context.Context, id string) (answer, error) {
	res, rpcErr, err := tc.rpc(ctx, "tasks/cancel", map[string]any{"taskId": id})
	if err != nil || rpcErr != nil {
		return deref(rpcErr), err
	}
	var st taskState
	_ = json.Unmarshal(res, &st)
	if st.Status == "" {
		// 2026-07-28 acknowledges; the task says what became of it.
		a, _, err := tc.state(ctx, id)
		return a, err
	}
	return answer{Status: st.Status, ExecutionID: st.TaskID, Raw: string(res)}, nil
}

func (tc *taskCaller) callTool(ctx context.Context, name string, args, meta map[string]any) (answer, error) {
	params := map[string]any{"name": name, "arguments": args}
	if meta != nil {
		params["_meta"] = meta
	}
	res, rpcErr, err := tc.rpc(ctx, "tools/call", params)
	if err != nil || rpcErr != nil {
		return deref(rpcErr), err
	}
	return mcpResult(res), nil
}

func (tc *taskCaller) resolve(ctx context.Context, id string, body map[string]any) (answer, error) {
	return reconcileResolve(ctx, tc, id, body)
}

func (tc *taskCaller) close() {}

func deref(a *answer) answer {
	if a == nil {
		return answer{}
	}
	return *a
}
