package embed

import (
	"strings"
	"testing"
	"time"
)

// TestLoadConfigOAuth checks auth.oauth: its keys reach the verifier's
// config, it turns auth on beside the static tokens, and a bad value is
// refused at start naming its key.
func TestLoadConfigOAuth(t *testing.T) {
	fc := mustLoadConfig(t, `auth:
  tokens:
    - {principal: planner, token_env: PLANNER_TOKEN}
  oauth:
    issuer: https://id.example.com
    audience: https://carmy.example.com/mcp
    jwks_url: https://id.example.com/jwks.json
    principal_claim: email
    tools_claim: carmy_tools
    refresh: 5m
`)
	a, err := fc.auth(func(string) string { return "planner-secret-0001" })
	if err != nil {
		t.Fatal(err)
	}
	o := a.OAuth
	if o == nil || o.Issuer != "https://id.example.com" || o.Audience != "https://carmy.example.com/mcp" || o.JWKSURL != "https://id.example.com/jwks.json" ||
		o.PrincipalClaim != "email" || o.ToolsClaim != "carmy_tools" || o.Refresh != 5*time.Minute || len(a.Tokens) != 1 || !a.Enabled() {
		t.Errorf("auth = %+v, OAuth %+v", a, o)
	}
	// Alone, it turns auth on.
	only := mustLoadConfig(t, "auth:\n  oauth: {issuer: \"http://127.0.0.1:9\", audience: carmy, jwks_url: \"http://127.0.0.1:9/jwks\"}\n")
	if a, err := only.auth(func(string) string { return "" }); err != nil || !a.Enabled() || a.OAuth.PrincipalClaim != "" {
		t.Errorf("oauth alone: %+v, %v", a, err)
	}

	base := map[string]string{"issuer": "https://id.example.com", "audience": "carmy", "jwks_url": "https://id.example.com/jwks"}
	for _, tc := range []struct{ key, value, want string }{
		{"issuer", "", "auth.oauth.issuer"},
		{"issuer", "http://id.example.com", "auth.oauth.issuer"},
		{"audience", "", "auth.oauth.audience"},
		{"jwks_url", "", "auth.oauth.jwks_url"},
		{"jwks_url", "id.example.com/jwks", "auth.oauth.jwks_url"},
		{"refresh", "10ms", "auth.oauth.refresh"},
		{"refresh", "soon", "refresh"},
		{"issuer_url", "https://x", "issuer_url"},
	} {
		var b strings.Builder
		b.WriteString("auth:\n  oauth:\n")
		for _, k := range []string{"issuer", "audience", "jwks_url"} {
			if k != tc.key {
				b.WriteString("    " + k + ": \"" + base[k] + "\"\n")
			}
		}
		if tc.value != "" {
			b.WriteString("    " + tc.key + ": \"" + tc.value + "\"\n")
		}
		if _, err := loadConfig(writeConfig(t, b.String())); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: %v, want an error naming %s", tc.key, tc.value, err, tc.want)
		}
	}
}
