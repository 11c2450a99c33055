package embed_test

// OAuth access tokens (docs/mcp.md#oauth, auth.oauth): a node accepts the
// JWTs of an issuer this test runs (its keys made here), through the
// official Go SDK's MCP client and the HTTP API alike, beside a static
// token.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/api/oauth/oauthtest"
	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/tests/testutil"
)

const (
	// oauthAudience is the audience of the OAuth test's access tokens.
	oauthAudience = "carmy-embed"
	// oauthPlanner is the static token beside OAuth.
	oauthPlanner = "oauth-planner-secret-0001"
)

// sdkConnect connects the official Go SDK's client to base's /mcp as
// token's holder at protocol version; the session closes at cleanup.
func sdkConnect(t *testing.T, base, token, version string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "carmy-test-go-sdk", Version: "v1"}, nil)
	tr := &sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: testutil.Bearer{Token: token, Next: http.DefaultTransport}}, DisableStandaloneSSE: true}
	cs, err := c.Connect(t.Context(), tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("go-sdk %s: connect: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// sdkCall calls tool with args and meta over cs; a protocol error fails t.
func sdkCall(t *testing.T, cs *sdk.ClientSession, tool string, args, meta map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("go-sdk: tools/call %s: %v", tool, err)
	}
	return res
}

// errorCode is the code of a tools/call result's error envelope.
func errorCode(res *sdk.CallToolResult) string {
	s, _ := res.StructuredContent.(map[string]any)
	e, _ := s["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// TestOAuth: alice's access token (tools claim [echo]) lists and calls
// echo alone over MCP at each protocol version of the fast path, her
// retry replays, and her record is hers over HTTP (the static token's
// principal does not find it); the static token keeps working over HTTP
// and MCP; an expired token cannot connect, and its 401 names the
// metadata document, which names the resource and the issuer.
func TestOAuth(t *testing.T) {
	t.Parallel() // a node of its own on ports the kernel picks
	iss := oauthtest.NewIssuer(t)
	iss.AddKey(t, "k1", jose.ES256)
	base, _ := startFromYAML(t, fmt.Sprintf(`demo_tools: true
auth:
  tokens:
    - {principal: planner, token_env: CARMY_TEST_PLANNER_TOKEN, tools: ["*"]}
  oauth:
    issuer: %q
    audience: %s
    jwks_url: %q
    tools_claim: carmy_tools
`, iss.URL, oauthAudience, iss.JWKSURL()), withEnv(map[string]string{"CARMY_TEST_PLANNER_TOKEN": oauthPlanner}))

	alice := iss.Token(t, "k1", "alice", oauthAudience, map[string]any{"carmy_tools": []string{"echo"}, "exp": time.Now().Add(time.Hour).Unix()})
	for _, version := range mcpversion.Versions(func(f mcpversion.Features) bool { return f.FastPath }) {
		t.Run("go-sdk/"+version, func(t *testing.T) {
			cs := sdkConnect(t, base, alice, version)
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %q, want %q", got, version)
			}
			list, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatalf("go-sdk: tools/list: %v", err)
			}
			var names []string
			for _, tool := range list.Tools {
				if !strings.HasPrefix(tool.Name, "carmy.") { // the reconcile tools: MCP's alone
					names = append(names, tool.Name)
				}
			}
			if !slices.Equal(names, []string{"echo"}) {
				t.Errorf("tools/list with alice's access token: %v, want [echo] (its tools claim)", names)
			}
			rid := "oauth-" + version
			meta := map[string]any{"carmy/request_id": rid}
			first := sdkCall(t, cs, "echo", map[string]any{"v": version}, meta)
			if first.IsError || first.Meta["carmy/status"] != "completed" {
				t.Fatalf("echo as alice: %+v", first)
			}
			if again := sdkCall(t, cs, "echo", map[string]any{"v": version}, meta); again.Meta["carmy/replayed"] != true || again.Meta["carmy/execution_id"] != first.Meta["carmy/execution_id"] {
				t.Errorf("retry as alice: %+v, want a replay", again)
			}
			if o := sdkCall(t, cs, "create_order", map[string]any{"sku": "KB-01"}, map[string]any{"carmy/request_id": rid + "-order"}); !o.IsError || errorCode(o) != "FORBIDDEN" {
				t.Errorf("create_order, outside alice's tools claim: %+v, want FORBIDDEN", o)
			}
			// The record is alice's: her token finds it over HTTP, the
			// static planner's does not (another principal).
			path := "/v1/executions?request_id=" + rid
			if status, _, body := testutil.DoHeaders(t, http.MethodGet, base+path, "", map[string]string{"Authorization": "Bearer " + alice}); status != 200 || !strings.Contains(body, fmt.Sprint(first.Meta["carmy/execution_id"])) {
				t.Errorf("GET %s as alice: %d %s", path, status, body)
			}
			if status, _, body := testutil.DoHeaders(t, http.MethodGet, base+path, "", map[string]string{"Authorization": "Bearer " + oauthPlanner}); status != 404 {
				t.Errorf("GET %s as planner: %d %s, want 404", path, status, body)
			}
		})
	}

	// The static token keeps working beside OAuth.
	status, _, raw := testutil.DoHeaders(t, http.MethodPost, base+"/v1/tools/call", `{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"static-1"}`,
		map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + oauthPlanner})
	var body map[string]any
	if err := json.Unmarshal([]byte(raw), &body); err != nil || status != 200 || body["status"] != "completed" {
		t.Errorf("static token: %d %s", status, raw)
	}
	planner := sdkConnect(t, base, oauthPlanner, "2025-11-25")
	if o := sdkCall(t, planner, "create_order", map[string]any{"sku": "KB-02"}, map[string]any{"carmy/request_id": "static-2"}); o.IsError {
		t.Errorf("static token over MCP: %+v", o)
	}

	// A bad token: the SDK cannot connect, and the 401 names the
	// metadata document, which names the issuer.
	expired := iss.Sign(t, "k1", false, iss.Claims("alice", oauthAudience, -time.Hour))
	cl := sdk.NewClient(&sdk.Implementation{Name: "carmy-test-go-sdk", Version: "v1"}, nil)
	tr := &sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: testutil.Bearer{Token: expired, Next: http.DefaultTransport}}, DisableStandaloneSSE: true}
	if cs, err := cl.Connect(t.Context(), tr, nil); err == nil {
		cs.Close()
		t.Errorf("the go-sdk client connected with an expired access token")
	}
	status, h, raw := testutil.DoHeaders(t, http.MethodPost, base+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": "Bearer " + expired})
	want := `resource_metadata="` + base + `/.well-known/oauth-protected-resource"`
	if wa := h.Get("WWW-Authenticate"); status != 401 || !strings.Contains(wa, want) || !strings.Contains(wa, `error="invalid_token"`) || !strings.Contains(raw, `"UNAUTHORIZED"`) {
		t.Errorf("expired token at /mcp: %d, WWW-Authenticate %q, %s", status, wa, raw)
	}
	if status, h, _ := testutil.DoHeaders(t, http.MethodGet, base+"/v1/tools", "", map[string]string{"Authorization": "Bearer " + expired}); status != 401 || !strings.Contains(h.Get("WWW-Authenticate"), want) {
		t.Errorf("expired token at GET /v1/tools: %d, WWW-Authenticate %q", status, h.Get("WWW-Authenticate"))
	}
	_, _, doc := testutil.DoHeaders(t, http.MethodGet, base+"/.well-known/oauth-protected-resource", "", nil)
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.Unmarshal([]byte(doc), &meta); err != nil || meta.Resource != base+"/mcp" || !slices.Equal(meta.AuthorizationServers, []string{iss.URL}) {
		t.Errorf("metadata document: %s (%v), want resource %s/mcp and authorization_servers [%s]", doc, err, base, iss.URL)
	}
}
