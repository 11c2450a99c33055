package mcp

import (
	"context"
	"net"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/carmyhq/carmy/engine"
)

// ErrInvalidToken is what Config.Verify returns (or wraps) for a token it
// does not know: the request is answered 401.
var ErrInvalidToken = auth.ErrInvalidToken

// MetadataPath is where the RFC 9728 protected-resource metadata document
// is served; it is also served at MetadataPath + Path.
const MetadataPath = "/.well-known/oauth-protected-resource"

// callerKey holds the caller in the token's auth.TokenInfo.Extra.
const callerKey = "carmy/caller"

// authenticate puts the SDK's bearer-token check (auth.RequireBearerToken)
// in front of next, with Config.Verify as the token check: a request
// without a valid token is answered 401 with
// WWW-Authenticate: Bearer resource_metadata="<base URL>/.well-known/oauth-protected-resource".
// The token's caller travels to the tools in the token's TokenInfo. With
// auth off (no Verify) every request passes, as Anonymous.
func (h *Handler) authenticate(next http.Handler) http.Handler {
	if h.cfg.Verify == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verify := func(_ context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
			caller, err := h.cfg.Verify(r, token)
			if err != nil {
				return nil, err
			}
			return &auth.TokenInfo{UserID: caller.Principal, Extra: map[string]any{callerKey: caller}}, nil
		}
		// Built per request, for the metadata URL is that of the
		// listener the request came in on (or the public URL). Tokens
		// carry no expiry: the operator issues and revokes them.
		auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
			ResourceMetadataURL:    h.baseURL(r) + MetadataPath,
			AllowMissingExpiration: true,
		})(next).ServeHTTP(w, r)
	})
}

// callerOf returns the caller of a request: the one its token resolved
// to, or anonymous when auth is off (anonymous nil means it is on).
func callerOf(extra *sdk.RequestExtra, anonymous *engine.Caller) *engine.Caller {
	if extra != nil && extra.TokenInfo != nil {
		if c, ok := extra.TokenInfo.Extra[callerKey].(*engine.Caller); ok {
			return c
		}
		return nil
	}
	return anonymous
}

// BaseURL is this node's base URL as the listener that r came in on
// names it: the connection's local address (which the client cannot
// choose, unlike Host), over https when r came over TLS. Config.BaseURL
// replaces it with the node's configured public URL.
func BaseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil {
		return scheme + "://" + local.String()
	}
	return scheme + "://127.0.0.1"
}

// baseURL is Config.BaseURL, or BaseURL.
func (h *Handler) baseURL(r *http.Request) string {
	if h.cfg.BaseURL != nil {
		return h.cfg.BaseURL(r)
	}
	return BaseURL(r)
}

// MetadataHandler serves the RFC 9728 protected-resource metadata
// document (SPEC §5.1), open to anyone: resource <base URL>/mcp, bearer
// tokens in the Authorization header, and no authorization_servers (the
// operator issues the tokens). base gives the base URL (nil: BaseURL),
// never from the request's Host. It answers GET (and CORS's OPTIONS).
func MetadataHandler(base func(*http.Request) string) http.Handler {
	if base == nil {
		base = BaseURL
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               base(r) + Path,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "Carmy",
		}).ServeHTTP(w, r)
	})
}
