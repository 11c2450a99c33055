package main_test

// Black-box tests of the MCP endpoint (docs/mcp.md): a built `carmy serve`
// process with tokens, driven over loopback by two independent MCP client
// implementations (the official Go SDK, which Carmy is built with, and
// mark3labs/mcp-go) at each protocol version Carmy serves, and by raw
// JSON-RPC for what clients do not send.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	m3client "github.com/mark3labs/mcp-go/client"
	m3transport "github.com/mark3labs/mcp-go/client/transport"
	m3 "github.com/mark3labs/mcp-go/mcp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/tests/testutil"
)

// The protocol versions docs/mcp.md names first: those of the fast path
// (internal/mcpversion).
var mcpVersions = mcpversion.Versions(func(f mcpversion.Features) bool { return f.FastPath })

// Tokens of the node: planner may call every tool, reader echo only.
const (
	mcpPlanner = "mcp-planner-secret-0001"
	mcpReader  = "mcp-reader-secret-00001"
)

// mcpNode is a running node with auth on.
type mcpNode struct {
	*testutil.Node
	t *testing.T
}

func startMCPNode(t *testing.T) mcpNode {
	t.Helper()
	bin := testutil.BuildCarmy(t)
	dir := t.TempDir()
	config := `demo_tools: true
auth:
  tokens:
    - {principal: planner, token_env: MCP_PLANNER_TOKEN, tools: ["*"]}
    - {principal: reader, token_env: MCP_READER_TOKEN, tools: [echo]}
`
	if err := os.WriteFile(filepath.Join(dir, "carmy.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{Env: []string{"MCP_PLANNER_TOKEN=" + mcpPlanner, "MCP_READER_TOKEN=" + mcpReader}},
		"--config", filepath.Join(dir, "carmy.yaml"), "--bootstrap")
	n.WaitReady(t, 30*time.Second)
	return mcpNode{n, t}
}

// raw posts body to path with headers and returns the status, the
// header and the body.
func (n mcpNode) raw(method, path, body string, header map[string]string) (int, http.Header, string) {
	n.t.Helper()
	return testutil.DoHeaders(n.t, method, n.URL+path, body, header)
}

// httpCall posts a call to POST /v1/tools/call as token.
func (n mcpNode) httpCall(token, body string) (int, map[string]any) {
	n.t.Helper()
	status, _, raw := n.raw(http.MethodPost, "/v1/tools/call", body, map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + token})
	var out map[string]any
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		n.t.Fatalf("POST /v1/tools/call: not JSON: %s", raw)
	}
	return status, out
}

// httpToolNames returns the tools GET /v1/tools lists for token, as
// name|description|schema (without the schema unless withSchema).
func (n mcpNode) httpToolNames(token string, withSchema bool) []string {
	n.t.Helper()
	_, _, raw := n.raw(http.MethodGet, "/v1/tools", "", map[string]string{"Authorization": "Bearer " + token})
	var list struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		n.t.Fatalf("GET /v1/tools: %v: %s", err, raw)
	}
	var names []string
	for _, t := range list.Tools {
		if withSchema {
			names = append(names, t.Name+"|"+t.Description+"|"+compactJSON(n.t, t.InputSchema))
		} else {
			names = append(names, t.Name+"|"+t.Description)
		}
	}
	return names
}

func compactJSON(t *testing.T, v any) string {
	t.Helper()
	var raw []byte
	switch v := v.(type) {
	case json.RawMessage:
		raw = v
	default:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var x any
	if err := json.Unmarshal(raw, &x); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	out, _ := json.Marshal(x) // map keys sorted
	return string(out)
}

// mcpOutcome is what a test reads of a tools/call result, whichever
// client made it.
type mcpOutcome struct {
	isError    bool
	meta       map[string]any
	structured map[string]any
	text       string
}

func (o mcpOutcome) errorCode() string {
	e, _ := o.structured["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// mcpClient is one MCP client implementation, connected as one principal.
type mcpClient interface {
	version() string
	toolNames() []string
	call(tool string, args map[string]any, meta map[string]any) mcpOutcome
}

// sdkClient is the official Go SDK's client.
type sdkClient struct {
	t  *testing.T
	cs *sdk.ClientSession
}

func newSDKClient(t *testing.T, n mcpNode, token, version string) mcpClient {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "carmy-test-go-sdk", Version: "v1"}, nil)
	tr := &sdk.StreamableClientTransport{Endpoint: n.URL + "/mcp", HTTPClient: &http.Client{Transport: testutil.Bearer{Token: token, Next: http.DefaultTransport}}, DisableStandaloneSSE: true}
	cs, err := c.Connect(t.Context(), tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("go-sdk %s: connect: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return &sdkClient{t, cs}
}

func (c *sdkClient) version() string { return c.cs.InitializeResult().ProtocolVersion }

func (c *sdkClient) toolNames() []string {
	c.t.Helper()
	res, err := c.cs.ListTools(c.t.Context(), nil)
	if err != nil {
		c.t.Fatalf("go-sdk: tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		if strings.HasPrefix(tool.Name, "carmy.") {
			continue // the reconcile tools (docs/mcp.md, "Reconciling from the model"): MCP's alone
		}
		names = append(names, tool.Name+"|"+tool.Description+"|"+compactJSON(c.t, tool.InputSchema))
	}
	return names
}

func (c *sdkClient) call(tool string, args, meta map[string]any) mcpOutcome {
	c.t.Helper()
	res, err := c.cs.CallTool(c.t.Context(), &sdk.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	if err != nil {
		c.t.Fatalf("go-sdk: tools/call %s: %v", tool, err)
	}
	o := mcpOutcome{isError: res.IsError, meta: res.Meta}
	o.structured, _ = res.StructuredContent.(map[string]any)
	if len(res.Content) == 1 {
		if tc, ok := res.Content[0].(*sdk.TextContent); ok {
			o.text = tc.Text
		}
	}
	return o
}

// m3Client is mark3labs/mcp-go's client, an independent implementation.
type m3Client struct {
	t   *testing.T
	c   *m3client.Client
	ver string
}

func newM3Client(t *testing.T, n mcpNode, token, version string) mcpClient {
	t.Helper()
	tr, err := m3transport.NewStreamableHTTP(n.URL+"/mcp", m3transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	c := m3client.NewClient(tr, m3client.WithProtocolVersion(version))
	if err := c.Start(t.Context()); err != nil {
		t.Fatalf("mcp-go %s: start: %v", version, err)
	}
	t.Cleanup(func() { c.Close() })
	init := m3.InitializeRequest{}
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = m3.Implementation{Name: "carmy-test-mcp-go", Version: "v1"}
	res, err := c.Initialize(t.Context(), init)
	if err != nil {
		t.Fatalf("mcp-go %s: initialize: %v", version, err)
	}
	return &m3Client{t, c, res.ProtocolVersion}
}

func (c *m3Client) version() string { return c.ver }

func (c *m3Client) toolNames() []string {
	c.t.Helper()
	res, err := c.c.ListTools(c.t.Context(), m3.ListToolsRequest{})
	if err != nil {
		c.t.Fatalf("mcp-go: tools/list: %v", err)
	}
	// mcp-go reads a schema into its own struct, which adds empty
	// "properties" and "required": the schemas are compared through the
	// SDK's client, which keeps them as sent.
	var names []string
	for _, tool := range res.Tools {
		if strings.HasPrefix(tool.Name, "carmy.") {
			continue // the reconcile tools (docs/mcp.md, "Reconciling from the model"): MCP's alone
		}
		names = append(names, tool.Name+"|"+tool.Description)
	}
	return names
}

func (c *m3Client) call(tool string, args, meta map[string]any) mcpOutcome {
	c.t.Helper()
	req := m3.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = tool, args
	if meta != nil {
		req.Params.Meta = &m3.Meta{AdditionalFields: meta}
	}
	res, err := c.c.CallTool(c.t.Context(), req)
	if err != nil {
		c.t.Fatalf("mcp-go: tools/call %s: %v", tool, err)
	}
	o := mcpOutcome{isError: res.IsError}
	if res.Meta != nil {
		o.meta = res.Meta.AdditionalFields
	}
	o.structured, _ = res.StructuredContent.(map[string]any)
	if len(res.Content) == 1 {
		if tc, ok := res.Content[0].(m3.TextContent); ok {
			o.text = tc.Text
		}
	}
	return o
}

// TestMCPBlackBox drives one node with both clients at every version:
// tools/list agrees with GET /v1/tools; a call runs, its retry (same
// carmy/request_id) replays, other arguments conflict, the same identity
// over HTTP replays the MCP call, and one made over HTTP first is replayed
// over MCP; an allow-list refuses over MCP as over HTTP.
func TestMCPBlackBox(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	n := startMCPNode(t)
	clients := map[string]func(*testing.T, mcpNode, string, string) mcpClient{"go-sdk": newSDKClient, "mcp-go": newM3Client}

	for _, impl := range []string{"go-sdk", "mcp-go"} {
		for _, version := range mcpVersions {
			t.Run(impl+"/"+version, func(t *testing.T) {
				n := mcpNode{n.Node, t}
				c := clients[impl](t, n, mcpPlanner, version)
				if c.version() != version {
					t.Fatalf("negotiated %q, want %q", c.version(), version)
				}
				if got, want := c.toolNames(), n.httpToolNames(mcpPlanner, impl == "go-sdk"); !slices.Equal(got, want) {
					t.Errorf("tools/list and GET /v1/tools differ:\n%v\n%v", got, want)
				}

				rid := fmt.Sprintf("order-%s-%s", impl, version)
				meta := map[string]any{"carmy/request_id": rid, "carmy/session_id": "s-" + impl, "carmy/metadata": map[string]any{"agent": "planner"}}
				first := c.call("create_order", map[string]any{"sku": "KB-01"}, meta)
				execID, _ := first.meta["carmy/execution_id"].(string)
				if first.isError || first.meta["carmy/replayed"] != false || first.meta["carmy/status"] != "completed" ||
					first.meta["carmy/request_id"] != rid || !strings.HasPrefix(execID, "exec_") {
					t.Fatalf("first call: %+v", first)
				}
				if first.structured["sku"] != "KB-01" || first.structured["order_id"] == nil {
					t.Errorf("structuredContent = %v, want the order", first.structured)
				}
				if compactJSON(t, json.RawMessage(first.text)) != compactJSON(t, first.structured) {
					t.Errorf("text %q is not the JSON of structuredContent %v", first.text, first.structured)
				}

				again := c.call("create_order", map[string]any{"sku": "KB-01"}, meta)
				if again.isError || again.meta["carmy/replayed"] != true || again.meta["carmy/execution_id"] != execID ||
					compactJSON(t, again.structured) != compactJSON(t, first.structured) {
					t.Errorf("retry: %+v, want a replay of %s", again, execID)
				}

				conflict := c.call("create_order", map[string]any{"sku": "KB-02"}, meta)
				if !conflict.isError || conflict.errorCode() != "IDEMPOTENCY_CONFLICT" || conflict.meta["carmy/error_code"] != "IDEMPOTENCY_CONFLICT" {
					t.Errorf("other arguments: %+v, want IDEMPOTENCY_CONFLICT", conflict)
				}
				if e, _ := conflict.structured["error"].(map[string]any); e["execution_id"] != execID {
					t.Errorf("the conflict names %v, want %s", e["execution_id"], execID)
				}

				// The same identity over HTTP is the same call.
				status, body := n.httpCall(mcpPlanner, fmt.Sprintf(`{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":%q,"session_id":"s-%s","metadata":{"agent":"planner"}}`, rid, impl))
				if status != 200 || body["replayed"] != true || body["execution_id"] != execID {
					t.Errorf("POST /v1/tools/call of the MCP call's identity: %d %v, want a replay of %s", status, body, execID)
				}
				// And the other way round: HTTP first, then MCP, with the
				// session in the Carmy-Session-Id header's place (none: "").
				status, body = n.httpCall(mcpPlanner, fmt.Sprintf(`{"tool":"echo","arguments":{"n":1},"request_id":"http-%s"}`, rid))
				if status != 200 {
					t.Fatalf("HTTP call: %d %v", status, body)
				}
				replay := c.call("echo", map[string]any{"n": 1}, map[string]any{"carmy/request_id": "http-" + rid})
				if replay.isError || replay.meta["carmy/replayed"] != true || replay.meta["carmy/execution_id"] != body["execution_id"] {
					t.Errorf("MCP retry of an HTTP call: %+v, want a replay of %v", replay, body["execution_id"])
				}

				// A failed tool: isError, its error as structuredContent.
				failed := c.call("fail", map[string]any{"message": "no stock"}, map[string]any{"carmy/request_id": "fail-" + rid})
				if !failed.isError || failed.meta["carmy/status"] != "failed" || failed.errorCode() != "TOOL_ERROR" {
					t.Errorf("fail: %+v", failed)
				}

				// The reader may call echo only, over MCP as over HTTP.
				r := clients[impl](t, n, mcpReader, version)
				if got, want := r.toolNames(), n.httpToolNames(mcpReader, impl == "go-sdk"); !slices.Equal(got, want) || len(got) != 1 {
					t.Errorf("reader: tools/list %v, GET /v1/tools %v, want echo alone in both", got, want)
				}
				refused := r.call("create_order", map[string]any{"sku": "KB-01"}, map[string]any{"carmy/request_id": "r-" + rid})
				if !refused.isError || refused.errorCode() != "FORBIDDEN" || refused.meta["carmy/error_code"] != "FORBIDDEN" {
					t.Errorf("reader calls create_order over MCP: %+v, want FORBIDDEN", refused)
				}
				if status, body := n.httpCall(mcpReader, `{"tool":"create_order","arguments":{"sku":"KB-01"}}`); status != 403 {
					t.Errorf("reader calls create_order over HTTP: %d %v, want 403", status, body)
				}
				if ok := r.call("echo", map[string]any{"a": "b"}, nil); ok.isError || ok.structured["a"] != "b" || ok.meta["carmy/request_id"] != nil {
					t.Errorf("reader calls echo without a request_id: %+v", ok)
				}
			})
		}
	}

	t.Run("raw", func(t *testing.T) { mcpRawChecks(t, mcpNode{n.Node, t}) })
}

// mcpRawChecks sends what clients do not: no token, bad _meta values,
// arguments against the schema, bodies that are not JSON-RPC or too big,
// a wrong Accept; each answered in MCP's shapes.
func mcpRawChecks(t *testing.T, n mcpNode) {
	accept := "application/json, text/event-stream"
	h := func(token string) map[string]string {
		m := map[string]string{"Content-Type": "application/json", "Accept": accept, "Mcp-Protocol-Version": "2025-06-18"}
		if token != "" {
			m["Authorization"] = "Bearer " + token
		}
		return m
	}
	rpc := func(status int, raw string) map[string]any {
		t.Helper()
		if data, ok := strings.CutPrefix(raw, "event: message\ndata: "); ok {
			// A call with a progressToken is answered on an event stream
			// (docs/mcp.md#progress): its last event is the answer.
			events := strings.Split(strings.TrimSpace(data), "\n\nevent: message\ndata: ")
			raw = events[len(events)-1]
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(raw), &out); err != nil || out["jsonrpc"] != "2.0" {
			t.Errorf("status %d: not a JSON-RPC message: %q", status, raw)
		}
		return out
	}
	base := n.URL

	// No token, and an unknown one: 401 naming the metadata document.
	for _, token := range []string{"", "not-a-token"} {
		status, header, raw := n.raw(http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, h(token))
		if want := `resource_metadata="` + base + `/.well-known/oauth-protected-resource"`; status != 401 || !strings.Contains(header.Get("WWW-Authenticate"), want) {
			t.Errorf("token %q: %d, WWW-Authenticate %q; want 401 with %s", token, status, header.Get("WWW-Authenticate"), want)
		}
		rpc(status, raw)
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		status, _, raw := n.raw(http.MethodGet, path, "", nil)
		var doc map[string]any
		_ = json.Unmarshal([]byte(raw), &doc)
		if status != 200 || doc["resource"] != base+"/mcp" || fmt.Sprint(doc["bearer_methods_supported"]) != "[header]" || doc["authorization_servers"] != nil {
			t.Errorf("GET %s: %d %s", path, status, raw)
		}
	}

	call := func(params string) (int, map[string]any) {
		t.Helper()
		status, _, raw := n.raw(http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":`+params+`}`, h(mcpPlanner))
		return status, rpc(status, raw)
	}
	refusal := func(what string, status int, msg map[string]any, code, field string) {
		t.Helper()
		res, _ := msg["result"].(map[string]any)
		sc, _ := res["structuredContent"].(map[string]any)
		e, _ := sc["error"].(map[string]any)
		meta, _ := res["_meta"].(map[string]any)
		if status != 200 || res["isError"] != true || e["code"] != code || meta["carmy/error_code"] != code || (field != "" && e["field"] != field) {
			t.Errorf("%s: %d %v; want an isError result %s (field %q)", what, status, msg, code, field)
		}
	}
	for _, c := range []struct{ what, meta, field string }{
		{"request_id a number", `{"carmy/request_id":5}`, "request_id"},
		{"request_id empty", `{"carmy/request_id":""}`, "request_id"},
		{"request_id too long", `{"carmy/request_id":"` + strings.Repeat("x", 256) + `"}`, "request_id"},
		{"request_id with a space", `{"carmy/request_id":"a b"}`, "request_id"},
		{"session_id an object", `{"carmy/session_id":{}}`, "session_id"},
		{"metadata a string", `{"carmy/metadata":"x"}`, "metadata"},
		{"timeout_ms zero", `{"carmy/timeout_ms":0}`, "timeout_ms"},
		{"timeout_ms a fraction", `{"carmy/timeout_ms":1.5}`, "timeout_ms"},
	} {
		status, msg := call(`{"name":"echo","arguments":{},"_meta":` + c.meta + `}`)
		refusal(c.what, status, msg, "INVALID_REQUEST", c.field)
	}
	status, msg := call(`{"name":"create_order","arguments":{"sku":1},"_meta":{"carmy/request_id":"schema-1"}}`)
	refusal("arguments against the schema", status, msg, "INVALID_REQUEST", "arguments.sku")
	status, msg = call(`{"name":"create_order","arguments":[1],"_meta":{"carmy/request_id":"schema-2"}}`)
	refusal("arguments an array", status, msg, "INVALID_REQUEST", "arguments")

	// The protocol's own _meta keys never enter the fingerprint.
	status, msg = call(`{"name":"echo","arguments":{"k":1},"_meta":{"carmy/request_id":"fp-1","progressToken":1}}`)
	first, _ := msg["result"].(map[string]any)
	status2, msg2 := call(`{"name":"echo","arguments":{"k":1},"_meta":{"carmy/request_id":"fp-1","progressToken":2,"other/key":true}}`)
	again, _ := msg2["result"].(map[string]any)
	m1, _ := first["_meta"].(map[string]any)
	m2, _ := again["_meta"].(map[string]any)
	if status != 200 || status2 != 200 || m2["carmy/replayed"] != true || m1["carmy/execution_id"] != m2["carmy/execution_id"] {
		t.Errorf("other _meta keys changed the call: %v then %v", msg, msg2)
	}

	// Protocol errors: an unknown tool, _meta that is not an object.
	for _, c := range []struct{ what, params string }{
		{"unknown tool", `{"name":"no_such_tool","arguments":{}}`},
		{"_meta a number", `{"name":"echo","arguments":{},"_meta":5}`},
	} {
		status, msg := call(c.params)
		e, _ := msg["error"].(map[string]any)
		if status != 200 || e["code"] != float64(-32602) {
			t.Errorf("%s: %d %v, want JSON-RPC error -32602", c.what, status, msg)
		}
	}

	// Transport refusals: JSON-RPC errors with the transport's status.
	for _, c := range []struct {
		what   string
		body   string
		header map[string]string
		status int
		code   float64
	}{
		{"not JSON", `{"jsonrpc":"2.0",`, h(mcpPlanner), 400, -32700},
		{"not JSON-RPC", `[]`, h(mcpPlanner), 400, 0},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"tools/list"}`, h(mcpPlanner), 400, 0},
		{"over the limit", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"pad":"` + strings.Repeat("x", 2<<20) + `"}}}`, h(mcpPlanner), 413, -32600},
		{"wrong Accept", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"Content-Type": "application/json", "Accept": "text/html", "Authorization": "Bearer " + mcpPlanner}, 400, -32600},
		{"wrong Content-Type", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{"Content-Type": "text/plain", "Accept": accept, "Authorization": "Bearer " + mcpPlanner}, 415, -32600},
	} {
		status, header, raw := n.raw(http.MethodPost, "/mcp", c.body, c.header)
		msg := rpc(status, raw)
		e, _ := msg["error"].(map[string]any)
		if status != c.status || !strings.HasPrefix(header.Get("Content-Type"), "application/json") || e == nil || (c.code != 0 && e["code"] != c.code) {
			t.Errorf("%s: %d %q %s; want %d with a JSON-RPC error %v", c.what, status, header.Get("Content-Type"), raw, c.status, c.code)
		}
	}
	// A method other than POST: 405 with the error envelope.
	status, header, raw := n.raw(http.MethodGet, "/mcp", "", map[string]string{"Accept": "text/event-stream", "Authorization": "Bearer " + mcpPlanner})
	if status != 405 || !strings.Contains(raw, `"METHOD_NOT_ALLOWED"`) || !strings.Contains(header.Get("Allow"), "POST") {
		t.Errorf("GET /mcp: %d %v %s", status, header, raw)
	}

	// The node is still up and answering.
	if err := n.Ready(); err != nil {
		t.Errorf("after the bad input: %v", err)
	}
}

// TestMCPThreeNodes: one identity on a cluster of three processes, over
// both transports (docs/mcp.md: a call made over MCP and one made over HTTP
// with the same identity are the same call). create_order is called over
// MCP on a follower (the go-sdk client, 2025-11-25), retried over HTTP on
// the leader and over MCP on the other follower (mcp-go at 2025-06-18,
// then go-sdk at 2026-07-28, which the SDK serves without Carmy's fast
// path): it runs once. create_order's order id is the reservation's
// fencing token, unique cluster-wide, so a second execution anywhere
// would show as another order id, as well as another execution id.
func TestMCPThreeNodes(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds the carmy binary and runs a cluster of three processes")
	}
	bin := testutil.BuildCarmy(t)
	// --dev: the demo tools, auth off (the cluster helpers read
	// GET /v1/cluster without a token), every caller anonymous; the
	// clients' token is ignored.
	c := testutil.StartCluster(t, bin, 3, testutil.StartOptions{}, "--dev", "--fast-failover")
	leader := c.Leader(t, 30*time.Second)
	followers := c.Followers(leader)
	if len(followers) != 2 {
		t.Fatalf("%d followers of %s, want 2", len(followers), leader.ID())
	}
	a, b, cn := mcpNode{followers[0], t}, mcpNode{leader, t}, mcpNode{followers[1], t}

	const rid, session = "order-3n-1", "s-3n"
	meta := map[string]any{"carmy/request_id": rid, "carmy/session_id": session, "carmy/metadata": map[string]any{"agent": "planner"}}
	args := map[string]any{"sku": "KB-01"}

	first := newSDKClient(t, a, mcpPlanner, "2025-11-25").call("create_order", args, meta)
	execID, _ := first.meta["carmy/execution_id"].(string)
	orderID := first.structured["order_id"]
	if _, isNumber := orderID.(float64); first.isError || first.meta["carmy/replayed"] != false || first.meta["carmy/status"] != "completed" ||
		!strings.HasPrefix(execID, "exec_") || !isNumber {
		t.Fatalf("MCP on %s: %+v, want a first run creating an order", a.ID(), first)
	}

	status, body := b.httpCall(mcpPlanner, fmt.Sprintf(`{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":%q,"session_id":%q,"metadata":{"agent":"planner"}}`, rid, session))
	data, _ := body["data"].(map[string]any)
	if status != 200 || body["replayed"] != true || body["execution_id"] != execID || data["order_id"] != orderID {
		t.Errorf("HTTP retry on %s: %d %v, want a replay of %s (order %v)", b.ID(), status, body, execID, orderID)
	}

	for _, retry := range []struct {
		impl    string
		version string
		client  func(*testing.T, mcpNode, string, string) mcpClient
	}{{"mcp-go", "2025-06-18", newM3Client}, {"go-sdk", "2026-07-28", newSDKClient}} {
		again := retry.client(t, cn, mcpPlanner, retry.version).call("create_order", args, meta)
		if again.isError || again.meta["carmy/replayed"] != true || again.meta["carmy/execution_id"] != execID ||
			again.meta["carmy/status"] != "completed" || again.structured["order_id"] != orderID {
			t.Errorf("MCP retry on %s (%s %s): %+v, want a replay of %s (order %v)", cn.ID(), retry.impl, retry.version, again, execID, orderID)
		}
	}

	// One execution: the record, read on any node, is A's, completed.
	for _, n := range []mcpNode{a, b, cn} {
		_, _, raw := n.raw(http.MethodGet, "/v1/executions?session_id="+session+"&request_id="+rid, "", map[string]string{"Authorization": "Bearer " + mcpPlanner})
		var rec map[string]any
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			t.Fatalf("%s: lookup: %v: %s", n.ID(), err, raw)
		}
		if rec["execution_id"] != execID || rec["status"] != "completed" || rec["node_id"] != a.ID() {
			t.Errorf("%s: the record is %s, want %s, completed on %s", n.ID(), raw, execID, a.ID())
		}
	}
}
