package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/mcp"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/mcpgateway"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// TestEndpointPaths: the server routes the endpoint's own paths.
func TestEndpointPaths(t *testing.T) {
	if mcp.Path != api.MCPPath || mcp.MetadataPath != api.MCPMetadataPath {
		t.Errorf("paths %q %q, the server's %q %q", mcp.Path, mcp.MetadataPath, api.MCPPath, api.MCPMetadataPath)
	}
}

// TestEndpointTakesTheHost checks the seam: the endpoint asks the host's
// Verify (a token it does not resolve is refused 401 with MCP's
// challenge), tells its Observe of each tools/call, listens only with
// upstreams, serves the metadata document naming the host's base URL and
// issuers, and refuses as JSON-RPC's invalid request with the host's
// error object as data.
func TestEndpointTakesTheHost(t *testing.T) {
	rt := engine.New(engine.WithLogger(slog.New(slog.DiscardHandler)))
	if err := rt.AddTool(engine.ToolSpec{Name: "echo", Func: func(_ context.Context, c engine.Call) (any, error) { return c.Arguments, nil }}); err != nil {
		t.Fatal(err)
	}
	rt.StartInBackground(t.Context())
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	// Calls are refused UNAVAILABLE until the runtime's start has marked
	// earlier executions: wait for it (a busy machine is slower than the
	// first call).
	wait.For(t, 30*time.Second, "the runtime ready", func() error { return rt.Ready(t.Context()) })
	var mu sync.Mutex
	var seen []api.MCPCall
	alice := &engine.Caller{Principal: "alice"}
	host := api.MCPHost{
		Runtime:   rt,
		BodyLimit: 1 << 20,
		Logger:    slog.New(slog.DiscardHandler),
		Verify: func(_ *http.Request, token string) *engine.Caller {
			if token == "good-token" {
				return alice
			}
			return nil
		},
		Observe: func(_ context.Context, c api.MCPCall) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, c)
		},
		BaseURL: func(*http.Request) string { return "https://carmy.example" },
		Issuers: []string{"https://issuer.example"},
	}
	ep, err := mcp.Endpoint(host)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.CloseStreams()
	if ep.Listens() {
		t.Error("an endpoint without upstreams listens")
	}
	post := func(token, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, mcp.Path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		ep.ServeHTTP(w, r)
		return w
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":1},"_meta":{"carmy/request_id":"r1"}}}`
	if w := post("bad-token", call); w.Code != http.StatusUnauthorized || !strings.Contains(w.Header().Get("WWW-Authenticate"), `resource_metadata="https://carmy.example`+mcp.MetadataPath+`"`) {
		t.Errorf("an unknown token: %d %q %s", w.Code, w.Header().Get("WWW-Authenticate"), w.Body)
	}
	if w := post("good-token", call); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"result"`) {
		t.Fatalf("a known token: %d %s", w.Code, w.Body)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0].Principal != "alice" || seen[0].Tool != "echo" || seen[0].RequestID != "r1" || seen[0].ExecutionID == "" || seen[0].Code != "" {
		t.Errorf("Observe was told %+v, want one call of alice's", seen)
	}
	mu.Unlock()

	w := httptest.NewRecorder()
	ep.Metadata().ServeHTTP(w, httptest.NewRequest(http.MethodGet, mcp.MetadataPath, nil))
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &meta); err != nil || meta.Resource != "https://carmy.example/mcp" ||
		len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != "https://issuer.example" {
		t.Errorf("metadata: %d %s (%v)", w.Code, w.Body, err)
	}

	w = httptest.NewRecorder()
	ep.Refuse(w, http.StatusTooManyRequests, "slow down", map[string]any{"code": "RATE_LIMITED"})
	raw, _ := io.ReadAll(w.Body)
	var refusal struct {
		ID    any `json:"id"`
		Error struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &refusal); err != nil || w.Code != http.StatusTooManyRequests || refusal.ID != nil ||
		refusal.Error.Code != -32600 || refusal.Error.Message != "slow down" || refusal.Error.Data["code"] != "RATE_LIMITED" {
		t.Errorf("Refuse wrote %d %s (%v)", w.Code, raw, err)
	}

	withUpstreams, err := mcp.EndpointWith(mcpgateway.NewDirectory(nil))(host)
	if err != nil {
		t.Fatal(err)
	}
	defer withUpstreams.CloseStreams()
	if !withUpstreams.Listens() {
		t.Error("an endpoint with upstreams does not listen")
	}
}
