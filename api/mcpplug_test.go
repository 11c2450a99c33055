package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/oauth/oauthtest"
	"github.com/carmyhq/carmy/store"
)

// TestNoMCPNoRoute checks that a server given no Config.MCP serves no
// /mcp and no metadata document (404 NOT_FOUND), and that its 401s then
// name no metadata document, while they still say invalid_token.
func TestNoMCPNoRoute(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	iss.AddKey(t, "k1", jose.ES256)
	cfg := oauthConfig(iss)
	cfg.Logger = quietLogger()
	s, err := api.New(&fakeRuntime{tb: t}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)

	wantError(t, post(t, srv, api.MCPPath, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "Authorization", "Bearer "+plannerToken),
		http.StatusNotFound, store.CodeNotFound)
	wantError(t, get(t, srv, api.MCPMetadataPath), http.StatusNotFound, store.CodeNotFound)
	wantError(t, get(t, srv, api.MCPMetadataPath+api.MCPPath), http.StatusNotFound, store.CodeNotFound)

	expired := iss.Sign(t, "k1", false, iss.Claims("alice", oauthAudience, -time.Hour))
	a := post(t, srv, callPath, `{"tool":"echo"}`, bearer(expired)...)
	wantError(t, a, http.StatusUnauthorized, store.CodeUnauthorized)
	if h := a.header.Get("WWW-Authenticate"); strings.Contains(h, "resource_metadata") || !strings.Contains(h, `error="invalid_token"`) {
		t.Errorf("WWW-Authenticate without /mcp: %q", h)
	}
}
