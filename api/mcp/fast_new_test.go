package mcp

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	m3client "github.com/mark3labs/mcp-go/client"
	m3transport "github.com/mark3labs/mcp-go/client/transport"
	m3 "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/internal/mcpversion"
)

// The fast path at 2026-07-28 (fastpath/meta.go) against the SDK.

// newMeta is the _meta a 2026-07-28 client sends with every request, as
// the go-sdk client does, followed by Carmy's keys.
const newMeta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"agent","version":"v1.0.0"},` +
	`"io.modelcontextprotocol/clientCapabilities":{}`

// newCall is a 2026-07-28 tools/call of tool with the _meta members meta
// (joined by commas), and the headers its client sends.
// metaServerInfo is the _meta key of the server's name in a 2026-07-28
// result.
const metaServerInfo = "io.modelcontextprotocol/serverInfo"

func newCall(name string, fast bool, tool, args string, meta ...string) fastCase {
	params := `{"name":"` + tool + `"`
	if args != "" {
		params += `,"arguments":` + args
	}
	params += `,"_meta":{` + strings.Join(meta, ",") + `}}`
	return fastCase{name: name, body: callBody("1", params), fast: fast, header: map[string]string{
		"Mcp-Protocol-Version": mcpversion.V20260728, "Mcp-Method": methodCallTool, "Mcp-Name": tool,
	}}
}

// with returns c with headers set ("" removes one).
func (c fastCase) with(kv ...string) fastCase {
	h := map[string]string{}
	for k, v := range c.header {
		h[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	c.header = h
	return c
}

// newProtocolCases are 2026-07-28 requests the fast path serves and
// requests it leaves to the SDK.
func newProtocolCases() []fastCase {
	rid := `"carmy/request_id":"r-1"`
	caps := func(v string) string { return `"io.modelcontextprotocol/clientCapabilities":` + v }
	info := func(v string) string { return `"io.modelcontextprotocol/clientInfo":` + v }
	version := func(v string) string { return `"io.modelcontextprotocol/protocolVersion":` + v }
	v := version(`"2026-07-28"`)
	return []fastCase{
		newCall("good call", true, "echo", `{"sku":"KB-01","n":2}`, newMeta, rid),
		newCall("Carmy's keys first", true, "echo", `{}`, rid, `"carmy/session_id":"s-1"`, newMeta),
		newCall("replay", true, "echo", `{}`, newMeta, `"carmy/request_id":"replay-1"`),
		newCall("no arguments", true, "echo", ``, newMeta),
		newCall("no clientInfo", true, "echo", `{}`, v, caps(`{}`)),
		newCall("logLevel", true, "echo", `{}`, newMeta, `"io.modelcontextprotocol/logLevel":"debug"`),
		newCall("odd logLevel", true, "echo", `{}`, newMeta, `"io.modelcontextprotocol/logLevel":5`),
		newCall("full clientInfo", true, "echo", `{}`, v, caps(`{}`), info(`{"name":"a","title":"A","version":"1","websiteUrl":"https://a.example"}`)),
		newCall("capabilities", true, "echo", `{}`, v, caps(`{"roots":{"listChanged":true},"sampling":{},"elicitation":{},"extensions":{"io.example/x":{}}}`)),
		newCall("failed", true, "fail", `{}`, newMeta, rid),
		newCall("conflict", true, "conflict", `{}`, newMeta, rid),
		newCall("uncertain", true, "uncertain", `{}`, newMeta, rid),
		newCall("unavailable", true, "busy", `{}`, newMeta),
		newCall("invalid", true, "invalid", `{}`, newMeta),
		newCall("internal error", true, "broken", `{}`, newMeta),
		newCall("scalar data", true, "scalar", `{}`, newMeta),
		newCall("html data", true, "html", `{}`, newMeta),
		newCall("unknown tool", true, "nosuch", `{}`, newMeta),
		newCall("reconcile tool", true, "carmy.lookup", `{"request_id":"r-9"}`, newMeta),
		newCall("bad carmy _meta", true, "echo", `{}`, newMeta, `"carmy/timeout_ms":"soon"`),
		newCall("result _meta key of the protocol", true, "echo", `{}`, newMeta, `"carmy/metadata":{"io.modelcontextprotocol/serverInfo":1}`),
		newCall("Mcp-Param header of an unbound tool", true, "echo", `{"region":"eu"}`, newMeta).with("Mcp-Param-Region", "eu"),
		newCall("Mcp-Session-Id", true, "echo", `{}`, newMeta).with("Mcp-Session-Id", "x"),

		// Left to the SDK.
		newCall("no Mcp-Method", false, "echo", `{}`, newMeta).with("Mcp-Method", ""),
		newCall("Mcp-Method of another method", false, "echo", `{}`, newMeta).with("Mcp-Method", "tools/list"),
		newCall("Mcp-Method in other case", false, "echo", `{}`, newMeta).with("Mcp-Method", "Tools/Call"),
		newCall("no Mcp-Name", false, "echo", `{}`, newMeta).with("Mcp-Name", ""),
		newCall("Mcp-Name of another tool", false, "echo", `{}`, newMeta).with("Mcp-Name", "fail"),
		newCall("empty tool name", false, "", `{}`, newMeta),
		newCall("no _meta keys", false, "echo", `{}`),
		newCall("Carmy's keys only", false, "echo", `{}`, rid),
		newCall("no protocolVersion", false, "echo", `{}`, caps(`{}`)),
		newCall("older protocolVersion", false, "echo", `{}`, version(`"2025-11-25"`), caps(`{}`)),
		newCall("newer protocolVersion", false, "echo", `{}`, version(`"2027-01-01"`), caps(`{}`)).with("Mcp-Protocol-Version", "2027-01-01"),
		newCall("numeric protocolVersion", false, "echo", `{}`, version(`20260728`), caps(`{}`)),
		newCall("escaped protocolVersion", false, "echo", `{}`, version(`"2026\u002d07-28"`), caps(`{}`)),
		newCall("no clientCapabilities", false, "echo", `{}`, v),
		newCall("null clientCapabilities", false, "echo", `{}`, v, caps(`null`)),
		newCall("array clientCapabilities", false, "echo", `{}`, v, caps(`[]`)),
		newCall("string clientCapabilities", false, "echo", `{}`, v, caps(`"all"`)),
		newCall("mistyped clientCapabilities", false, "echo", `{}`, v, caps(`{"roots":{"listChanged":"yes"}}`)),
		newCall("null clientInfo", false, "echo", `{}`, v, caps(`{}`), info(`null`)),
		newCall("string clientInfo", false, "echo", `{}`, v, caps(`{}`), info(`"agent"`)),
		newCall("mistyped clientInfo", false, "echo", `{}`, v, caps(`{}`), info(`{"name":5}`)),
		newCall("another key of the protocol", false, "echo", `{}`, newMeta, `"io.modelcontextprotocol/related-task":{"taskId":"t"}`),
		newCall("header-bound tool", false, "headed", `{"region":"eu"}`, newMeta).with("Mcp-Param-Region", "eu"),
		newCall("header-bound tool without its header", false, "headed", `{"region":"eu"}`, newMeta),
		newCall("header-bound tool, wrong header", false, "headed", `{"region":"eu"}`, newMeta).with("Mcp-Param-Region", "us"),
		newCall("no Mcp-Protocol-Version", false, "echo", `{}`, newMeta).with("Mcp-Protocol-Version", ""),
		newCall("protocolVersion at 2025-11-25", false, "echo", `{}`, newMeta).with("Mcp-Protocol-Version", "2025-11-25"),
		newCall("JSON accept only", false, "echo", `{}`, newMeta).with("Accept", "application/json"),
		{name: "tools/list", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{` + newMeta + `}}}`,
			header: map[string]string{"Mcp-Protocol-Version": mcpversion.V20260728, "Mcp-Method": "tools/list"}},
		{name: "server/discover", body: `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{` + newMeta + `}}}`,
			header: map[string]string{"Mcp-Protocol-Version": mcpversion.V20260728, "Mcp-Method": "server/discover"}},
	}
}

// TestFastPathMatchesSDKNewProtocol sends each request of
// newProtocolCases through the fast path and through the SDK alone: the
// answers (status, headers, bytes) and what Observe is told are the
// same, and the fast path serves exactly the requests it should.
func TestFastPathMatchesSDKNewProtocol(t *testing.T) {
	for _, withAuth := range []bool{false, true} {
		t.Run(fmt.Sprintf("auth=%v", withAuth), func(t *testing.T) {
			p := newPathPair(t, withAuth)
			cases := newProtocolCases()
			if withAuth {
				cases = append(cases,
					newCall("allow-listed tool", true, "echo", `{}`, newMeta).with("Authorization", "Bearer tok-some"),
					newCall("tool outside the allow-list", true, "fail", `{}`, newMeta).with("Authorization", "Bearer tok-some"),
					newCall("unknown tool in the allow-list", true, "nosuch", `{}`, newMeta).with("Authorization", "Bearer tok-some"),
					newCall("rate limited", true, "echo", `{}`, newMeta).with("Authorization", "Bearer tok-throttled"),
					newCall("unknown token", false, "echo", `{}`, newMeta).with("Authorization", "Bearer nope"),
				)
			}
			for _, c := range cases {
				// Twice: the second time, the verdict on the client's _meta
				// is the one kept.
				for range 2 {
					if tookFast := p.compare(t, c); tookFast != c.fast {
						t.Errorf("%s: served by the fast path: %v, want %v", c.name, tookFast, c.fast)
					}
				}
			}
		})
	}
}

// TestFastPathNewProtocolResult checks what the SDK adds to a result at
// 2026-07-28, which the fast path must add too.
func TestFastPathNewProtocolResult(t *testing.T) {
	p := newPathPair(t, false)
	for _, h := range []*Handler{p.fast, p.sdk} {
		got := p.serve(h, newCall("good call", true, "echo", `{}`, newMeta))
		for _, want := range []string{`"resultType":"complete"}`, `"io.modelcontextprotocol/serverInfo":{"name":"carmy","title":"Carmy","version":"v1"}`} {
			if !strings.Contains(got.body, want) {
				t.Errorf("answer %s lacks %s", got.body, want)
			}
		}
	}
}

// TestFastPathServesGoSDKClient connects the official Go SDK's client at
// every version Carmy serves and checks that its tools/calls are
// answered by the fast path, with what the SDK would have answered: a
// call, its replay (carmy/replayed), a conflict (isError with
// IDEMPOTENCY_CONFLICT) and an unknown tool (JSON-RPC -32602).
func TestFastPathServesGoSDKClient(t *testing.T) {
	p := newPathPair(t, true)
	srv := httptest.NewServer(p.fast)
	t.Cleanup(srv.Close)
	for _, version := range mcpversion.Versions(func(f mcpversion.Features) bool { return f.FastPath }) {
		t.Run(version, func(t *testing.T) {
			c := sdk.NewClient(&sdk.Implementation{Name: "fast-path-test", Version: "v1"}, nil)
			tr := &sdk.StreamableClientTransport{Endpoint: srv.URL + Path, DisableStandaloneSSE: true,
				HTTPClient: &http.Client{Transport: bearerRT{"tok-all", http.DefaultTransport}}}
			cs, err := c.Connect(t.Context(), tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %s, want %s", got, version)
			}
			before := p.fast.fast.Served()
			call := func(tool, rid string) *sdk.CallToolResult {
				t.Helper()
				res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: tool, Arguments: map[string]any{"sku": "KB-01"},
					Meta: sdk.Meta{"carmy/request_id": rid, "carmy/session_id": "s-1"}})
				if err != nil {
					t.Fatalf("tools/call %s: %v", tool, err)
				}
				return res
			}
			if res := call("echo", "r-1"); res.IsError || res.Meta["carmy/replayed"] != false || res.Meta["carmy/status"] != "completed" {
				t.Errorf("call: %+v", res)
			}
			if res := call("echo", "replay-1"); res.IsError || res.Meta["carmy/replayed"] != true {
				t.Errorf("replay: %+v", res)
			}
			if res := call("conflict", "r-1"); !res.IsError || res.Meta["carmy/error_code"] != "IDEMPOTENCY_CONFLICT" {
				t.Errorf("conflict: %+v", res)
			}
			_, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "nosuch"})
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("unknown tool: %v, want JSON-RPC error -32602", err)
			}
			if served := p.fast.fast.Served() - before; served != 4 {
				t.Errorf("the fast path served %d of the 4 calls", served)
			}
			if version == mcpversion.V20260728 {
				if res := call("echo", "r-2"); res.Meta[metaServerInfo] == nil {
					t.Errorf("a 2026-07-28 result without %s: %+v", metaServerInfo, res.Meta)
				}
			}
		})
	}
	p.fastObs.take()
}

// TestFastPathServesMCPGoClient checks that the calls of an independent
// client, mark3labs/mcp-go, take the fast path too, at 2025-11-25 and at
// 2026-07-28 (with its own _meta and headers).
func TestFastPathServesMCPGoClient(t *testing.T) {
	p := newPathPair(t, true)
	srv := httptest.NewServer(p.fast)
	t.Cleanup(srv.Close)
	for _, version := range []string{"2025-11-25", mcpversion.V20260728} {
		t.Run(version, func(t *testing.T) {
			tr, err := m3transport.NewStreamableHTTP(srv.URL+Path, m3transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer tok-all"}))
			if err != nil {
				t.Fatal(err)
			}
			c := m3client.NewClient(tr, m3client.WithProtocolVersion(version))
			if err := c.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			init := m3.InitializeRequest{}
			init.Params.ProtocolVersion = version
			init.Params.ClientInfo = m3.Implementation{Name: "fast-path-test", Version: "v1"}
			if res, err := c.Initialize(t.Context(), init); err != nil || res.ProtocolVersion != version {
				t.Fatalf("initialize: %v, %+v", err, res)
			}
			before := p.fast.fast.Served()
			req := m3.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = "echo", map[string]any{"a": 1}
			req.Params.Meta = &m3.Meta{AdditionalFields: map[string]any{"carmy/request_id": "replay-1"}}
			res, err := c.CallTool(t.Context(), req)
			if err != nil || res.IsError || res.Meta == nil || res.Meta.AdditionalFields["carmy/replayed"] != true {
				t.Fatalf("tools/call: %v, %+v", err, res)
			}
			if served := p.fast.fast.Served() - before; served != 1 {
				t.Errorf("the fast path served %d of 1 call", served)
			}
		})
	}
	p.fastObs.take()
}

// bearerRT adds a bearer token to every request.
type bearerRT struct {
	token string
	next  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
