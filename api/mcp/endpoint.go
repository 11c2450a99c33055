package mcp

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
)

// Endpoint is an api.MCP: the endpoint of this package, served by an
// api.Server at /mcp (api.Config.MCP) with its tokens, limits, metrics
// and call log. It passes no upstream MCP server through.
func Endpoint(host api.MCPHost) (api.MCPEndpoint, error) { return EndpointWith(nil)(host) }

// EndpointWith is Endpoint whose /mcp also passes through the resources
// and prompts of upstreams, and streams their list changes to the clients
// that listen (GET /mcp). Nil upstreams is Endpoint.
func EndpointWith(upstreams Upstreams) api.MCP {
	return func(host api.MCPHost) (api.MCPEndpoint, error) {
		cfg := Config{
			Runtime:   host.Runtime,
			BodyLimit: host.BodyLimit,
			Logger:    host.Logger,
			Admit:     host.Admit,
			Audit:     host.Audit,
			// The server checks Host on every route.
			HostChecked: true,
			BaseURL:     host.BaseURL,
			RecordView:  host.RecordView,
			Upstreams:   upstreams,
			Anonymous:   host.Anonymous,
		}
		if host.Observe != nil {
			cfg.Observe = func(ctx context.Context, c CallInfo) { host.Observe(ctx, mcpCall(c)) }
		}
		if verify := host.Verify; verify != nil {
			cfg.Verify = func(r *http.Request, token string) (*engine.Caller, error) {
				if caller := verify(r, token); caller != nil {
					return caller, nil
				}
				return nil, ErrInvalidToken
			}
		}
		h, err := New(cfg)
		if err != nil {
			return nil, err
		}
		return &endpoint{Handler: h, meta: MetadataHandler(host.BaseURL, host.Issuers...)}, nil
	}
}

// endpoint is a Handler as api.MCPEndpoint.
type endpoint struct {
	*Handler
	meta http.Handler
}

// Listens says GET /mcp is served: with upstreams, whose list changes it
// streams.
func (e *endpoint) Listens() bool { return e.cfg.Upstreams != nil }

// Metadata serves the protected-resource metadata document.
func (e *endpoint) Metadata() http.Handler { return e.meta }

// Refuse answers a refusal of the server as JSON-RPC's invalid request.
func (e *endpoint) Refuse(w http.ResponseWriter, status int, message string, data any) {
	WriteError(w, status, jsonrpc.CodeInvalidRequest, message, data)
}

// mcpCall is c as the server's call log takes it.
func mcpCall(c CallInfo) api.MCPCall {
	return api.MCPCall{Principal: c.Principal, Tool: c.Tool, RequestID: c.RequestID, SessionID: c.SessionID,
		ExecutionID: c.ExecutionID, Status: c.Status, Replayed: c.Replayed, Passthrough: c.Passthrough,
		Code: c.Code, Took: c.Took, StoreDetail: c.StoreDetail}
}
