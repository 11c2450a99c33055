package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// ErrInvalidToken is what Config.Verify returns (or wraps) for a token it
// does not know: the request is answered 401.
var ErrInvalidToken = auth.ErrInvalidToken

// MetadataPath is where the RFC 9728 protected-resource metadata document
// is served; it is also served at MetadataPath + Path.
const MetadataPath = "/.well-known/oauth-protected-resource"

// callerKey holds the caller in the token's auth.TokenInfo.Extra.
const callerKey = "carmy/caller"

// authenticate checks the bearer token of every request with
// Config.Verify before next: a request without a valid token is answered
// 401, a JSON-RPC error whose data is the error object of docs/errors.md (code
// UNAUTHORIZED), as every refusal of /mcp at the HTTP level, with
// WWW-Authenticate: Bearer resource_metadata="<base URL>/.well-known/oauth-protected-resource"
// (plus error="invalid_token" when a token was presented, RFC 6750 §3).
// The token's caller travels to the tools in the SDK's TokenInfo, which
// auth.RequireBearerToken puts in the request's context. With auth off
// (no Verify) every request passes, as Anonymous.
func (h *Handler) authenticate(next http.Handler) http.Handler {
	if h.cfg.Verify == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, presented := bearerOf(r)
		if !presented {
			h.unauthorized(w, r, false, "a bearer token is required (Authorization: Bearer <token>)")
			return
		}
		caller, err := h.cfg.Verify(r, token)
		switch {
		case errors.Is(err, ErrInvalidToken):
			h.unauthorized(w, r, true, "unknown, invalid or expired bearer token")
			return
		case err != nil:
			h.log.Error("mcp: checking a bearer token failed", slog.Any("err", err))
			refuse(w, http.StatusInternalServerError, jsonrpc.CodeInternalError, store.CodeInternal, "internal error")
			return
		}
		info := &auth.TokenInfo{UserID: caller.Principal, Extra: map[string]any{callerKey: caller}}
		// The SDK's check only carries info into the context: the
		// token is checked above. Static tokens carry no expiry.
		auth.RequireBearerToken(func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
			return info, nil
		}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next).ServeHTTP(w, r)
	})
}

// bearerOf returns r's bearer token as the SDK's check reads it.
func bearerOf(r *http.Request) (string, bool) {
	fields := strings.Fields(r.Header.Get("Authorization"))
	if len(fields) != 2 || !strings.EqualFold(fields[0], "Bearer") {
		return "", false
	}
	return fields[1], true
}

// unauthorized answers 401 with the challenge MCP's authorization wants.
func (h *Handler) unauthorized(w http.ResponseWriter, r *http.Request, presented bool, msg string) {
	challenge := fmt.Sprintf("Bearer resource_metadata=%q", h.baseURL(r)+MetadataPath)
	if presented {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	refuse(w, http.StatusUnauthorized, jsonrpc.CodeInvalidRequest, store.CodeUnauthorized, msg)
}

// refuse answers with status and a JSON-RPC error of rpcCode whose data
// is the error object (docs/errors.md) of code.
func refuse(w http.ResponseWriter, status, rpcCode int, code, msg string) {
	WriteError(w, status, rpcCode, msg, map[string]string{"code": code, "message": msg})
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
// document (docs/mcp.md), open to anyone: resource <base URL>/mcp, bearer
// tokens in the Authorization header, and authorization_servers naming
// issuers (none when the operator issues the tokens; the OAuth issuer
// when access tokens are accepted). base gives the base URL (nil:
// BaseURL), never from the request's Host. It answers GET (and CORS's
// OPTIONS).
func MetadataHandler(base func(*http.Request) string, issuers ...string) http.Handler {
	if base == nil {
		base = BaseURL
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               base(r) + Path,
			AuthorizationServers:   issuers,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "Carmy",
		}).ServeHTTP(w, r)
	})
}
