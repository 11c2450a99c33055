package main_test

// A black-box test of OAuth access tokens (docs/mcp.md#oauth, auth.oauth): a
// built `carmy serve` process accepts the JWTs of an issuer this test
// runs (its keys made here), through the official Go SDK's MCP client and
// the HTTP API alike, beside a static token.

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

	jose "github.com/go-jose/go-jose/v4"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/api/oauth/oauthtest"
	"github.com/carmyhq/carmy/tests/testutil"
)

const oauthAudience = "carmy-blackbox"

func TestOAuthBlackBox(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	iss := oauthtest.NewIssuer(t)
	iss.AddKey(t, "k1", jose.ES256)
	bin := testutil.BuildCarmy(t)
	dir := t.TempDir()
	config := fmt.Sprintf(`demo_tools: true
auth:
  tokens:
    - {principal: planner, token_env: MCP_PLANNER_TOKEN, tools: ["*"]}
  oauth:
    issuer: %q
    audience: %s
    jwks_url: %q
    tools_claim: carmy_tools
`, iss.URL, oauthAudience, iss.JWKSURL())
	if err := os.WriteFile(filepath.Join(dir, "carmy.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	node := testutil.StartCarmy(t, bin, testutil.StartOptions{Env: []string{"MCP_PLANNER_TOKEN=" + mcpPlanner}},
		"--config", filepath.Join(dir, "carmy.yaml"), "--bootstrap")
	node.WaitReady(t, 30*time.Second)
	n := mcpNode{node, t}

	alice := iss.Token(t, "k1", "alice", oauthAudience, map[string]any{"carmy_tools": []string{"echo"}, "exp": time.Now().Add(time.Hour).Unix()})
	for _, version := range mcpVersions {
		t.Run("go-sdk/"+version, func(t *testing.T) {
			n := mcpNode{node, t}
			c := newSDKClient(t, n, alice, version).(*sdkClient)
			if c.version() != version {
				t.Fatalf("negotiated %q, want %q", c.version(), version)
			}
			var names []string
			for _, s := range c.toolNames() {
				names = append(names, strings.SplitN(s, "|", 2)[0])
			}
			if !slices.Equal(names, []string{"echo"}) {
				t.Errorf("tools/list with alice's access token: %v, want [echo] (its tools claim)", names)
			}
			rid := "oauth-" + version
			meta := map[string]any{"carmy/request_id": rid}
			first := c.call("echo", map[string]any{"v": version}, meta)
			if first.isError || first.meta["carmy/status"] != "completed" {
				t.Fatalf("echo as alice: %+v", first)
			}
			if again := c.call("echo", map[string]any{"v": version}, meta); again.meta["carmy/replayed"] != true || again.meta["carmy/execution_id"] != first.meta["carmy/execution_id"] {
				t.Errorf("retry as alice: %+v, want a replay", again)
			}
			if o := c.call("create_order", map[string]any{"sku": "KB-01"}, map[string]any{"carmy/request_id": rid + "-order"}); !o.isError || o.errorCode() != "FORBIDDEN" {
				t.Errorf("create_order, outside alice's tools claim: %+v, want FORBIDDEN", o)
			}
			// The record is alice's: her token finds it over HTTP, the
			// static planner's does not (another principal).
			path := "/v1/executions?request_id=" + rid
			if status, _, body := n.raw(http.MethodGet, path, "", map[string]string{"Authorization": "Bearer " + alice}); status != 200 || !strings.Contains(body, fmt.Sprint(first.meta["carmy/execution_id"])) {
				t.Errorf("GET %s as alice: %d %s", path, status, body)
			}
			if status, _, body := n.raw(http.MethodGet, path, "", map[string]string{"Authorization": "Bearer " + mcpPlanner}); status != 404 {
				t.Errorf("GET %s as planner: %d %s, want 404", path, status, body)
			}
		})
	}

	// The static token keeps working beside OAuth.
	if status, body := n.httpCall(mcpPlanner, `{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"static-1"}`); status != 200 || body["status"] != "completed" {
		t.Errorf("static token: %d %v", status, body)
	}
	planner := newSDKClient(t, n, mcpPlanner, "2025-11-25")
	if o := planner.call("create_order", map[string]any{"sku": "KB-02"}, map[string]any{"carmy/request_id": "static-2"}); o.isError {
		t.Errorf("static token over MCP: %+v", o)
	}

	// A bad token: the SDK cannot connect, and the 401 names the
	// metadata document, which names the issuer.
	expired := iss.Sign(t, "k1", false, iss.Claims("alice", oauthAudience, -time.Hour))
	cl := sdk.NewClient(&sdk.Implementation{Name: "carmy-test-go-sdk", Version: "v1"}, nil)
	tr := &sdk.StreamableClientTransport{Endpoint: n.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{expired, http.DefaultTransport}}, DisableStandaloneSSE: true}
	if cs, err := cl.Connect(t.Context(), tr, nil); err == nil {
		cs.Close()
		t.Errorf("the go-sdk client connected with an expired access token")
	}
	status, h, body := n.raw(http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": "Bearer " + expired})
	want := `resource_metadata="` + n.URL + `/.well-known/oauth-protected-resource"`
	if wa := h.Get("WWW-Authenticate"); status != 401 || !strings.Contains(wa, want) || !strings.Contains(wa, `error="invalid_token"`) || !strings.Contains(body, `"UNAUTHORIZED"`) {
		t.Errorf("expired token at /mcp: %d, WWW-Authenticate %q, %s", status, wa, body)
	}
	if status, h, _ := n.raw(http.MethodGet, "/v1/tools", "", map[string]string{"Authorization": "Bearer " + expired}); status != 401 || !strings.Contains(h.Get("WWW-Authenticate"), want) {
		t.Errorf("expired token at GET /v1/tools: %d, WWW-Authenticate %q", status, h.Get("WWW-Authenticate"))
	}
	_, _, doc := n.raw(http.MethodGet, "/.well-known/oauth-protected-resource", "", nil)
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.Unmarshal([]byte(doc), &meta); err != nil || meta.Resource != n.URL+"/mcp" || !slices.Equal(meta.AuthorizationServers, []string{iss.URL}) {
		t.Errorf("metadata document: %s (%v), want resource %s/mcp and authorization_servers [%s]", doc, err, n.URL, iss.URL)
	}
}
