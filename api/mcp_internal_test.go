package api

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/carmyhq/carmy/engine"
)

// TestVerifyMCPResolvesNothing: the endpoint's token check answers only
// what gateMCP resolved for the same token, and refuses anything else
// (fail closed) rather than resolve a token a second time.
func TestVerifyMCPResolvesNothing(t *testing.T) {
	au := &authenticator{}
	caller := &engine.Caller{Principal: "p"}
	with := func(tok mcpToken) context.Context {
		return context.WithValue(context.Background(), mcpTokenKey{}, tok)
	}
	for _, c := range []struct {
		name string
		ctx  context.Context
		want *engine.Caller
	}{
		{"resolved", with(mcpToken{token: "tok", caller: caller}), caller},
		{"not through gateMCP", context.Background(), nil},
		{"unknown token", with(mcpToken{token: "tok"}), nil},
		{"another token", with(mcpToken{token: "other", caller: caller}), nil},
	} {
		r := httptest.NewRequest("POST", MCPPath, nil).WithContext(c.ctx)
		if got := au.verifyMCP(r, "tok"); got != c.want {
			t.Errorf("%s: verifyMCP = %v", c.name, got)
		}
	}
}
