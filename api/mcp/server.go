package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/api/mcp/internal/fastpath"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/jsonscan"
	"github.com/carmyhq/carmy/internal/tracing"
	"github.com/carmyhq/carmy/store"
)

// Path is where the endpoint is served.
const Path = "/mcp"

// SessionHeader names the session of a call whose _meta has no
// carmy/session_id.
const SessionHeader = "Carmy-Session-Id"

// Runtime is what the endpoint calls of the tool runtime; *engine.Runtime
// implements it. Errors carry the error codes of docs/errors.md through store.Coded.
type Runtime interface {
	// Call runs a tool (docs/api.md#calling-a-tool-post-v1toolscall). It decides every call: a tool
	// outside the caller's allow-list is an *engine.ForbiddenError
	// (whether it exists or not), an unknown one an error of code
	// UNKNOWN_TOOL; the endpoint checks neither itself.
	Call(ctx context.Context, caller engine.Caller, req engine.Request) (engine.Response, error)
	// Tools lists the registered tools (which the endpoint mirrors into
	// the SDK's server: catalog.go).
	Tools() []engine.ToolInfo
	// ToolsFor lists those caller may call (tools/list, and what
	// subscriptions/listen watches); engine.Runtime's decides which.
	ToolsFor(caller engine.Caller) []engine.ToolInfo
	// ToolsGeneration changes whenever Tools does.
	ToolsGeneration() uint64
	// Execution returns an execution the caller may see, else
	// store.ErrNotFound (tasks/get, tasks/result).
	Execution(ctx context.Context, caller engine.Caller, id string) (store.Record, error)
	// Lookup returns the caller's record of an identity (carmy.lookup).
	Lookup(ctx context.Context, caller engine.Caller, session, requestID string) (store.Record, error)
	// List returns a page of the caller's records (tasks/list).
	List(ctx context.Context, caller engine.Caller, req engine.ListRequest) (store.Page, error)
	// Cancel cancels a running execution (tasks/cancel, carmy.cancel,
	// notifications/cancelled).
	Cancel(ctx context.Context, caller engine.Caller, id string) (store.Record, error)
	// Resolve settles an interrupted execution (carmy.resolve).
	Resolve(ctx context.Context, caller engine.Caller, id string, res engine.Resolution) (store.Record, error)
}

// runCanceller is what a Runtime may also do (*engine.Runtime does):
// cancel the tool of an execution running on this node that has no
// record (a call without request_id), for notifications/cancelled.
type runCanceller interface {
	CancelRun(id string) bool
}

// Config configures the endpoint. Runtime is required; the functions are
// how the HTTP server lends its own policies.
type Config struct {
	Runtime Runtime
	// Verify resolves a bearer token into its caller, or returns an error
	// that matches ErrInvalidToken for a token it does not know. Nil Verify
	// means auth is off: every request is Anonymous's, with or without a
	// token.
	Verify func(r *http.Request, token string) (*engine.Caller, error)
	// Anonymous is every caller when Verify is nil.
	Anonymous *engine.Caller
	// Admit, when set, is asked for every message the caller sends (each
	// entry of a batch apart): for a tools/call before the runtime
	// decides it, refusing the call with a result (isError); for any
	// other message before it is read, refusing it with HTTP 429 and
	// JSON-RPC error CodeRateLimited. An error of it is RATE_LIMITED,
	// with its fields, and may implement RetryAfter.
	Admit func(caller *engine.Caller) error
	// Observe, when set, is told how every tools/call ended, from the
	// goroutine that answered it: for metrics and the call log.
	Observe func(ctx context.Context, c CallInfo)
	// Audit, when set, is told of every cancel and resolution asked for
	// here (carmy.cancel, carmy.resolve, tasks/cancel), refusals
	// included, with Transport TransportMCP: the server's one audit path.
	Audit func(ctx context.Context, d engine.Decision)
	// BodyLimit bounds a request body in bytes (required).
	BodyLimit int64
	Logger    *slog.Logger
	// HostChecked says the server in front checks the Host header itself
	// (api.Server does, against its allow-list): the SDK's own check,
	// which refuses any Host but a loopback one on a loopback listener
	// when auth is off, is then off, so that one list governs every route.
	HostChecked bool
	// BaseURL, when set, gives the node's base URL for the
	// WWW-Authenticate resource_metadata of a 401 (the node's public URL,
	// or its listener's address); nil means BaseURL. Never the Host.
	BaseURL func(r *http.Request) string
	// Upstreams, when set, are the upstream MCP servers whose resources
	// and prompts pass through (passthrough.go), and whose changes reach
	// the clients that listen (listen.go).
	Upstreams Upstreams
	// RecordView, when set, gives the JSON of an execution as
	// GET /v1/executions shows it, for the reconcile tools (docs/mcp.md, "Reconciling from the model");
	// released tells that it is the record a release removed
	// (carmy.resolve with status released), which the view says as
	// POST /v1/executions/{id}/resolve does ("released": true). Nil means
	// a rendering of the same fields of its own.
	RecordView func(rec store.Record, released bool) any
}

// Handler serves /mcp. It is an http.Handler, safe for concurrent use.
type Handler struct {
	cfg     Config
	server  *sdk.Server
	stream  *sdk.StreamableHTTPHandler
	catalog *catalog
	log     *slog.Logger
	// disableLocalhostProtection is the SDK's option of that name, as
	// set: the fast path checks what the SDK checks.
	disableLocalhostProtection bool
	// noFastPath sends every request through the SDK (for the tests that
	// compare the two paths).
	noFastPath bool
	// fast answers the plain tools/calls it takes as the SDK would
	// (package fastpath), before the SDK sees them.
	fast *fastpath.Server
	// serve is authenticate over serveMCP, built once.
	serve http.Handler
	// impl is the server's name, as the SDK tells it.
	impl *sdk.Implementation
	// inflight holds the tools/calls this node serves, for
	// notifications/cancelled (inflight.go).
	inflight inflight
	// streams holds the open streams of list_changed notifications
	// (listen.go).
	streams hub
}

// New returns the endpoint for cfg.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.Runtime == nil:
		return nil, errors.New("mcp: nil runtime")
	case cfg.Verify == nil && cfg.Anonymous == nil:
		return nil, errors.New("mcp: auth off, and no anonymous caller")
	case cfg.BodyLimit <= 0:
		return nil, errors.New("mcp: no body limit")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{cfg: cfg, log: cfg.Logger}
	// The SDK logs every request's session at INFO; Carmy's call log
	// says what matters. Its warnings and errors are kept.
	sdkLog := slog.New(warnings{cfg.Logger.Handler()})
	h.impl = &sdk.Implementation{Name: "carmy", Title: "Carmy", Version: "v1"}
	implJSON, err := jsonscan.MarshalNoHTML(h.impl)
	if err != nil {
		return nil, fmt.Errorf("mcp: the server's name: %w", err)
	}
	h.server = sdk.NewServer(h.impl, &sdk.ServerOptions{
		Logger: sdkLog,
		// Tools only: no logging capability (the SDK's default), which a
		// stateless server could not honour.
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
		Instructions: "Carmy runs these tools at most once per identity. Pass a unique \"carmy/request_id\" in the _meta of each tools/call " +
			"and the same one again when you retry it: a retry is answered with the recorded result instead of running the tool again.",
		// tools/list is per principal (catalog.go): never cacheable across
		// principals.
		SetCacheable: func(_ context.Context, _ sdk.Request, c *sdk.Cacheable) {
			c.TTLMs, c.CacheScope = 0, "private"
		},
	})
	h.catalog = newCatalog(cfg.Runtime, h.server, h.handOver, cfg.Logger)
	h.server.AddReceivingMiddleware(h.middleware)
	h.serve = h.authenticate(http.HandlerFunc(h.serveMCP))
	h.disableLocalhostProtection = cfg.Verify != nil || cfg.HostChecked
	h.fast = fastpath.New(fastpath.Config{
		Middleware: h.middleware,
		Tool:       h.runTool,
		ServerInfo: implJSON,
		CheckHost:  !h.disableLocalhostProtection,
		Callable:   h.catalog.fastCallable,
		MetaKeys:   []string{MetaRequestID, MetaSessionID, MetaMetadata, MetaTimeoutMS},
		Logger:     cfg.Logger,
	})
	h.stream = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return h.server }, &sdk.StreamableHTTPOptions{
		Stateless: true,
		// One JSON answer per request: a tools/call has one result, and
		// a stateless server sends no requests of its own.
		JSONResponse:        true,
		Logger:              sdkLog,
		MaxRequestBodyBytes: cfg.BodyLimit,
		// With auth on, a token guards every request; the SDK's check of
		// the Host header (against DNS rebinding of a loopback server) is
		// kept for a node without auth, unless the server in front checks
		// Host itself (HostChecked).
		DisableLocalhostProtection: h.disableLocalhostProtection,
		// From 2026-07-28 on, a handler's context ends with its request,
		// as the fast path's does: a tools/call whose client closes the
		// stream is cancelled (detached.go).
		PropagateRequestCancellation: true,
	})
	return h, nil
}

// ServeHTTP serves one request of the Streamable HTTP transport.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &refusalWriter{ResponseWriter: w}
	defer sw.finish()
	h.serve.ServeHTTP(sw, r)
}

// middleware sees every JSON-RPC request the server receives: it keeps
// the catalog current, lists the caller's own tools, and runs and
// observes every tools/call.
//
// A tools/call does not go to the SDK's registry first: the runtime
// decides it, the allow-list and the tool included (callTool), as it
// decides POST /v1/tools/call, so that a tool outside the caller's
// allow-list is FORBIDDEN whether it exists or not, and an unknown one
// is -32602 from the runtime's UNKNOWN_TOOL. The result is then handed
// to the SDK (next, whose tool handler, handOver, returns CallInfo's
// ran), which
// finishes it as it finishes its tools' results (resultType at
// 2026-07-28).
func (h *Handler) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		switch method {
		case "tools/list":
			h.catalog.sync()
			res, err := next(ctx, method, req)
			if lr, ok := res.(*sdk.ListToolsResult); ok && err == nil {
				lr.Tools = h.catalog.allowed(callerOf(req.GetExtra(), h.cfg.Anonymous), lr.Tools)
			}
			return res, err
		case "tools/call":
			cr, ok := req.(*sdk.CallToolRequest)
			if !ok || cr.Params == nil {
				return next(ctx, method, req)
			}
			return h.observed(ctx, cr, func(ctx context.Context, info *CallInfo) (sdk.Result, error) {
				// The SDK's registry must hold what the runtime runs, for
				// next to find it.
				h.catalog.sync()
				res, err := h.callTool(ctx, cr)
				switch {
				case err != nil:
					return nil, err
				case res == nil: // a task whose request left the node (serveTaskCall)
					return res, nil
				}
				info.ran = res
				out, err := next(ctx, method, req)
				if err != nil {
					// The tool left the registry between the sync and now:
					// the call ran, and its result stands as it is.
					return res, nil
				}
				return out, nil
			})
		}
		if h.cfg.Upstreams != nil && passthroughMethods[method] {
			return h.passthrough(ctx, method, req)
		}
		return next(ctx, method, req)
	}
}

// observed runs one tools/call with its CallInfo in ctx, and tells
// Observe how it ended.
func (h *Handler) observed(ctx context.Context, req *sdk.CallToolRequest, call func(context.Context, *CallInfo) (sdk.Result, error)) (sdk.Result, error) {
	start := time.Now()
	info := &CallInfo{Tool: req.Params.Name, caller: callerOf(req.Extra, h.cfg.Anonymous)}
	if info.caller != nil {
		info.Principal = info.caller.Principal
	}
	// The call's span, a child of the trace context in _meta; Observe
	// tells it the call's attributes.
	ctx, span := tracing.StartCallMeta(ctx, req.Params.Meta)
	defer span.End()
	res, err := call(withCallInfo(ctx, info), info)
	if err != nil && info.Code == "" {
		info.Code = codeOfRPCError(err)
	}
	info.Took, info.ran = time.Since(start), nil
	if h.cfg.Observe != nil {
		h.cfg.Observe(ctx, *info)
	}
	return res, err
}

// warnings passes on the records of WARN and above.
type warnings struct{ slog.Handler }

func (w warnings) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}

func (w warnings) WithAttrs(as []slog.Attr) slog.Handler { return warnings{w.Handler.WithAttrs(as)} }
func (w warnings) WithGroup(name string) slog.Handler    { return warnings{w.Handler.WithGroup(name)} }
