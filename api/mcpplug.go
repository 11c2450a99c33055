package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// Where the Model Context Protocol is served: the endpoint at MCPPath,
// the RFC 9728 protected-resource metadata document it points to at
// MCPMetadataPath (and at MCPMetadataPath + MCPPath).
const (
	MCPPath         = "/mcp"
	MCPMetadataPath = "/.well-known/oauth-protected-resource"
)

// MCP makes the endpoint a server serves at /mcp (docs/mcp.md), from
// what the server lends it; it is called once, by New. Package api links
// no MCP implementation: package api/mcp gives one (mcp.Endpoint, or
// mcp.EndpointWith for upstream MCP servers), and the node (package
// embed) wires it in. Config.MCP nil serves no /mcp.
type MCP func(MCPHost) (MCPEndpoint, error)

// MCPEndpoint is the endpoint an MCP makes. The server routes POST
// MCPPath (and GET when it Listens) to it behind its own gate: the
// Host check, the bearer token resolved once (Verify), the failed
// authentications of the client address, and the bound on the time a
// body may take.
type MCPEndpoint interface {
	// ServeHTTP serves the requests of MCPPath.
	http.Handler
	// Listens says whether GET MCPPath is served (a stream of
	// notifications); otherwise it is 405.
	Listens() bool
	// Metadata serves the protected-resource metadata document, open to
	// anyone.
	Metadata() http.Handler
	// Refuse answers a request the server refused before the endpoint
	// read it (RATE_LIMITED, INVALID_REQUEST) as a JSON-RPC error of no
	// id, with status and data (the error object of docs/errors.md).
	Refuse(w http.ResponseWriter, status int, message string, data any)
	// CloseStreams ends the streams that last until their client leaves.
	CloseStreams()
}

// MCPHost is what a server lends the endpoint at /mcp: its runtime, its
// policies and its accounting.
type MCPHost struct {
	// Runtime is the server's (New's rt).
	Runtime Runtime
	// BodyLimit bounds a request body in bytes.
	BodyLimit int64
	Logger    *slog.Logger
	// Verify resolves a bearer token into its caller, nil for a token it
	// does not know. Nil when auth is off: every request is Anonymous's.
	Verify func(r *http.Request, token string) *engine.Caller
	// Anonymous is every caller when Verify is nil.
	Anonymous *engine.Caller
	// Admit is asked for every message a caller sends (each entry of a
	// batch apart); its error is RATE_LIMITED (an *Error, with its
	// fields) and has a RetryAfter() time.Duration method.
	Admit func(caller *engine.Caller) error
	// Observe is told how every tools/call ended, from the goroutine that
	// answered it: the server counts it (Metrics) and logs it as it does
	// POST /v1/tools/call's.
	Observe func(ctx context.Context, c MCPCall)
	// Audit is told of every cancel and resolution asked for at /mcp,
	// refusals included: the server's one audit path.
	Audit func(ctx context.Context, d engine.Decision)
	// BaseURL gives the node's base URL (Config.PublicURL, or the
	// listener's address), never the request's Host; the server checks
	// Host itself on every route.
	BaseURL func(r *http.Request) string
	// Issuers are the OAuth authorization servers whose access tokens
	// the server accepts (Auth.JWT), for the metadata document.
	Issuers []string
	// RecordView gives the JSON of an execution as GET /v1/executions
	// shows it; released tells that it is the record a release removed.
	RecordView func(rec store.Record, released bool) any
}

// MCPCall is what MCPHost.Observe is told of one tools/call: who called
// which tool under which identity, which execution answered, and how.
// Code is "" for a call answered with its record, else the error code
// (docs/errors.md) of the refusal.
type MCPCall struct {
	Principal, Tool, RequestID, SessionID string
	ExecutionID, Status                   string
	// Replayed says a recorded outcome was replayed; Passthrough that the
	// tool is read-only: it ran, and nothing was reserved or recorded.
	Replayed, Passthrough bool
	Code                  string
	Took                  time.Duration
	// StoreDetail is what the store's backend said of a failure the
	// answer reports without it (store.DetailOf), for the node's log.
	StoreDetail string
}
