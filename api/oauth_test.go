package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/oauth"
	"github.com/carmyhq/carmy/api/oauth/oauthtest"
	"github.com/carmyhq/carmy/store"
)

const oauthAudience = "https://carmy.test/mcp"

// oauthConfig is authConfig with access tokens of iss accepted, whose
// carmy_tools claim is the allow-list.
func oauthConfig(iss *oauthtest.Issuer) api.Config {
	cfg := authConfig()
	cfg.Auth.MetricsToken = "tok-metrics-0123456789"
	cfg.Auth.OAuth = &oauth.Config{Issuer: iss.URL, Audience: oauthAudience, JWKSURL: iss.JWKSURL(), ToolsClaim: "carmy_tools"}
	return cfg
}

// TestOAuthCallers checks that a valid access token is its principal
// claim (under "oauth:") with its tools claim as allow-list, on the HTTP
// API and at /mcp,
// and that the static tokens keep working beside it.
func TestOAuthCallers(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	iss.AddKey(t, "k1", jose.RS256)
	srv, callers := authServer(t, oauthConfig(iss))
	alice := iss.Token(t, "k1", "alice", oauthAudience, map[string]any{"carmy_tools": []string{"echo"}})

	wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`, bearer(alice)...), http.StatusOK)
	c := callers.mustGet(t)
	if c.Principal != "oauth:alice" || c.Admin || !c.MayCall("echo") || c.MayCall("sleep") {
		t.Errorf("caller of alice's access token: %+v (echo %v, sleep %v)", c, c.MayCall("echo"), c.MayCall("sleep"))
	}
	wantJSON(t, get(t, srv, "/v1/executions/exec_1", bearer(alice)...), http.StatusOK)
	if c := callers.mustGet(t); c.Principal != "oauth:alice" {
		t.Errorf("GET execution: caller %+v", c)
	}
	// Static tokens beside it.
	wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`, bearer(plannerToken)...), http.StatusOK)
	if c := callers.mustGet(t); c.Principal != "planner" {
		t.Errorf("static token: caller %+v", c)
	}
	// An access token never opens the admin's routes nor /metrics.
	wantError(t, get(t, srv, "/v1/activity", bearer(alice)...), http.StatusForbidden, store.CodeForbidden)
	wantError(t, get(t, srv, "/metrics", bearer(alice)...), http.StatusForbidden, store.CodeForbidden)

	// /mcp: the same caller, the same allow-list.
	status, msg := mcpPost(t, srv.URL, alice, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	raw, _ := json.Marshal(msg)
	if status != http.StatusOK || !strings.Contains(string(raw), `"name":"echo"`) || strings.Contains(string(raw), `"name":"sleep"`) {
		t.Errorf("tools/list with alice's access token: %d %s", status, raw)
	}
	// Without a tools claim, no tool (but the reconcile tools, carmy.*).
	bob := iss.Token(t, "k1", "bob", oauthAudience, nil)
	status, msg = mcpPost(t, srv.URL, bob, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if raw, _ := json.Marshal(msg); status != http.StatusOK || strings.Count(string(raw), `"name":"`) != strings.Count(string(raw), `"name":"carmy.`) {
		t.Errorf("tools/list of a token without tools claim: %d %s", status, raw)
	}

	// The metadata document names the issuer.
	a := get(t, srv, "/.well-known/oauth-protected-resource")
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.Unmarshal(a.body, &meta); err != nil || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != iss.URL {
		t.Errorf("metadata document: %s (%v), want authorization_servers [%s]", a.body, err, iss.URL)
	}
}

// TestOAuthRefusals checks the answer to a bad access token on the HTTP
// API and at /mcp: 401 with the error object and a WWW-Authenticate that
// names the metadata document and error="invalid_token".
func TestOAuthRefusals(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	iss.AddKey(t, "k1", jose.ES256)
	srv, callers := authServer(t, oauthConfig(iss))
	claims := func(sub, aud string, ttl time.Duration) map[string]any { return iss.Claims(sub, aud, ttl) }
	meta := `resource_metadata="` + srv.URL + `/.well-known/oauth-protected-resource"`
	for _, tc := range []struct{ name, token string }{
		{"expired", iss.Sign(t, "k1", false, claims("alice", oauthAudience, -time.Hour))},
		{"wrong audience", iss.Sign(t, "k1", false, claims("alice", "https://other.test", time.Minute))},
		{"alg none", oauthtest.Unsigned(t, claims("alice", oauthAudience, time.Minute))},
	} {
		a := post(t, srv, callPath, `{"tool":"echo"}`, bearer(tc.token)...)
		wantError(t, a, http.StatusUnauthorized, store.CodeUnauthorized)
		if h := a.header.Get("WWW-Authenticate"); !strings.Contains(h, meta) || !strings.Contains(h, `error="invalid_token"`) {
			t.Errorf("%s: HTTP API WWW-Authenticate %q", tc.name, h)
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tc.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct {
				Data struct{ Code string } `json:"data"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if h := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != http.StatusUnauthorized || err != nil || body.Error.Data.Code != store.CodeUnauthorized ||
			!strings.Contains(h, meta) || !strings.Contains(h, `error="invalid_token"`) {
			t.Errorf("%s at /mcp: %d %+v (%v), WWW-Authenticate %q", tc.name, resp.StatusCode, body, err, h)
		}
	}
	// No token at all: no error="invalid_token" (RFC 6750 §3.1).
	a := post(t, srv, callPath, `{"tool":"echo"}`)
	if h := a.header.Get("WWW-Authenticate"); a.status != http.StatusUnauthorized || !strings.Contains(h, meta) || strings.Contains(h, "invalid_token") {
		t.Errorf("no token: %d, WWW-Authenticate %q", a.status, h)
	}
	if _, n := callers.get(); n != 0 {
		t.Errorf("the runtime was called %d times with bad tokens", n)
	}
}

// TestOAuthFailuresCount checks that refused access tokens count as
// failed authentications of the client's address, at /mcp and on the
// HTTP API alike: past the limit, a bad one is 429 and a valid one is
// served.
func TestOAuthFailuresCount(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	iss.AddKey(t, "k1", jose.RS256)
	cfg := oauthConfig(iss)
	cfg.AuthFailures = api.AuthFailures{PerMinute: 4}
	srv, _ := authServer(t, cfg)
	bad := iss.Sign(t, "k1", false, iss.Claims("alice", "https://other.test", time.Minute))
	for range 2 {
		wantError(t, post(t, srv, callPath, `{"tool":"echo"}`, bearer(bad)...), http.StatusUnauthorized, store.CodeUnauthorized)
		if status, _ := mcpPost(t, srv.URL, bad, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); status != http.StatusUnauthorized {
			t.Fatalf("bad access token at /mcp: %d, want 401", status)
		}
	}
	wantError(t, post(t, srv, callPath, `{"tool":"echo"}`, bearer(bad)...), http.StatusTooManyRequests, store.CodeRateLimited)
	good := iss.Token(t, "k1", "alice", oauthAudience, map[string]any{"carmy_tools": "echo"})
	wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`, bearer(good)...), http.StatusOK)
}

// TestOAuthPrincipalNamespace checks issue 39 item 4.3: an access token
// whose principal claim equals a static token's principal (or the
// admin's, or anonymous) is not that principal but its own, under
// "oauth:" (api.OAuthPrincipalPrefix), with no admin rights; and that
// with OAuth a static token principal cannot take a name of that
// namespace.
func TestOAuthPrincipalNamespace(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	iss.AddKey(t, "k1", jose.ES256)
	srv, callers := authServer(t, oauthConfig(iss))
	for _, sub := range []string{"planner", api.AdminPrincipal, "anonymous"} {
		token := iss.Token(t, "k1", sub, oauthAudience, map[string]any{"carmy_tools": "*"})
		wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`, bearer(token)...), http.StatusOK)
		if c := callers.mustGet(t); c.Principal != "oauth:"+sub || c.Admin {
			t.Errorf("access token of sub %q: caller %+v, want principal %q without admin rights", sub, c, "oauth:"+sub)
		}
		wantError(t, get(t, srv, "/v1/activity", bearer(token)...), http.StatusForbidden, store.CodeForbidden)
	}
	wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`, bearer(plannerToken)...), http.StatusOK)
	if c := callers.mustGet(t); c.Principal != "planner" {
		t.Errorf("the static planner token: caller %+v", c)
	}

	cfg := oauthConfig(iss)
	cfg.Auth.Tokens = append(cfg.Auth.Tokens, api.Token{Principal: "oauth:planner", Secret: "tok-squatter-0123456789"})
	if err := cfg.Auth.Validate(); err == nil || !strings.Contains(err.Error(), `"oauth:"`) {
		t.Errorf("a static principal oauth:planner beside OAuth: %v, want an error naming the prefix", err)
	}
	cfg.Auth.OAuth = nil
	if err := cfg.Auth.Validate(); err != nil {
		t.Errorf("a static principal oauth:planner without OAuth: %v", err)
	}
}
