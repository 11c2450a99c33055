package api

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"

	"github.com/carmyhq/carmy/api/oauth"
	"github.com/carmyhq/carmy/engine"
)

// reasonInvalidJWT begins the logged reason of a refused access token;
// the verifier's reason follows it.
const reasonInvalidJWT = "invalid access token"

// OAuthPrincipalPrefix begins the principal of every OAuth access token's
// caller: the value of its principal claim follows it ("oauth:alice" for
// sub "alice"). Access tokens and static tokens thus name principals of
// two namespaces: an issuer's subject can never be a static token's
// principal, the admin or anonymous, whatever it is called, so it never
// sees their executions nor spends their quotas. Auth.Validate refuses a
// static token principal that begins with it when OAuth is configured.
const OAuthPrincipalPrefix = "oauth:"

// resolve returns the caller of a bearer token: the static token's
// (compared in constant time), else, with OAuth configured and a token
// of a JWT's shape, the access token's, whose principal is its claim's
// under OAuthPrincipalPrefix. Nil with the reason to log when the token is
// neither.
func (au *authenticator) resolve(ctx context.Context, token string) (*engine.Caller, string) {
	if id := au.lookup(sha256.Sum256([]byte(token))); id != nil {
		return id, ""
	}
	if au.jwt == nil || !oauth.LooksLikeJWT(token) {
		return nil, reasonUnknown
	}
	id, err := au.jwt.Verify(ctx, token)
	if err != nil {
		return nil, reasonInvalidJWT + strings.TrimPrefix(err.Error(), oauth.ErrInvalidToken.Error())
	}
	caller := &engine.Caller{Principal: OAuthPrincipalPrefix + id.Principal, MaxEntries: au.maxEntries, MaxBytes: au.maxBytes}
	if !id.AllTools {
		caller.Tools = engine.NewToolSet(id.Tools...)
	}
	return caller, ""
}

// messageOf is the answer's message for a refused token's reason: no
// detail of why an access token was refused goes back to the client.
func messageOf(reason string) string {
	if strings.HasPrefix(reason, reasonInvalidJWT) {
		return "invalid or expired access token"
	}
	return "unknown bearer token"
}

// challenge is the WWW-Authenticate of a 401 of the HTTP API: realm
// "carmy"; with OAuth also error="invalid_token" when a bearer token was
// presented (RFC 6750 §3), and when /mcp is served the protected-resource
// metadata document, as at /mcp.
func (s *Server) challenge(r *http.Request) string {
	if s.auth.jwt == nil {
		return `Bearer realm="carmy"`
	}
	challenge := `Bearer realm="carmy"`
	if s.mcp != nil {
		challenge += fmt.Sprintf(", resource_metadata=%q", s.base(r)+MCPMetadataPath)
	}
	if _, presented, reason, err := bearerToken(r); presented && reason == "" && err == nil {
		challenge += `, error="invalid_token"`
	}
	return challenge
}
