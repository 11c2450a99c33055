package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/tracing"
	"github.com/carmyhq/carmy/store"
)

// Transports a call comes by, as the call log names them.
const (
	TransportHTTP = "http" // POST /v1/tools/call
	TransportMCP  = "mcp"  // tools/call at /mcp
)

// mcpRoutes serves the endpoint Config.MCP makes at /mcp (docs/mcp.md)
// and the RFC 9728 metadata document it points to; nothing when it is
// nil. This server lends the endpoint its tokens, the failures each
// client address may make, the principals' rate limits, its metrics and
// its call log.
func (s *Server) mcpRoutes(newEndpoint MCP, rt Runtime, limit int64, base func(*http.Request) string) error {
	if newEndpoint == nil {
		return nil
	}
	host := MCPHost{
		Runtime:    rt,
		BodyLimit:  limit,
		Logger:     s.log,
		Admit:      s.admitMCP,
		Observe:    s.observeMCP,
		Audit:      func(ctx context.Context, d engine.Decision) { s.audit(ctx, d) },
		BaseURL:    base,
		RecordView: func(r store.Record, released bool) any { return resolvedView(r, released) },
	}
	if s.auth.enabled {
		host.Verify = s.auth.verifyMCP
	} else {
		host.Anonymous = s.auth.anonymous
	}
	if s.auth.jwt != nil {
		host.Issuers = []string{s.auth.jwt.Issuer()}
	}
	h, err := newEndpoint(host)
	if err != nil {
		return err
	}
	if h == nil {
		return errors.New("Config.MCP made no endpoint")
	}
	s.mcp = h
	e := s.echo
	// POST, and when it listens GET (the stream of list_changed
	// notifications before 2026-07-28): a stateless server has no
	// session to DELETE; other methods are Echo's 405 (with Allow).
	e.POST(MCPPath, echo.WrapHandler(h), s.gateMCP)
	if h.Listens() {
		e.GET(MCPPath, echo.WrapHandler(h), s.gateMCP)
	}
	meta := echo.WrapHandler(h.Metadata())
	e.GET(MCPMetadataPath, meta)
	e.GET(MCPMetadataPath+MCPPath, meta)
	return nil
}

// gateMCP does for /mcp what identify does: a bearer token is resolved
// here, once per request, and admitted as admit says; the outcome travels
// in the request's context to verifyMCP, which the endpoint asks. A
// refusal RATE_LIMITED (the client address is over its failed
// authentications and the token does not resolve) or INVALID_REQUEST
// (two Authorization headers) is answered here as a JSON-RPC error whose
// data is the API's error object; an UNAUTHORIZED one (no token, a
// credential that is not a bearer token, an unknown token: the last two
// counted as failures) is left to the endpoint's 401, which carries MCP's
// WWW-Authenticate. It also bounds the time the body may take to arrive.
func (s *Server) gateMCP(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if s.auth.enabled {
			var id *engine.Caller
			token, _, err := s.auth.admit(c, func(token string) (bool, string) {
				var reason string
				id, reason = s.auth.resolve(r.Context(), token)
				return id != nil, reason
			})
			if e := (*Error)(nil); errors.As(err, &e) && e.Code != store.CodeUnauthorized {
				s.mcpRefuse(c, err)
				return nil
			}
			if id != nil {
				r = r.WithContext(context.WithValue(r.Context(), mcpTokenKey{}, mcpToken{token: token, caller: id}))
				c.SetRequest(r)
			}
		}
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(c.Response().Writer)
			if rc.SetReadDeadline(time.Now().Add(s.bodyTimeout)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		return next(c)
	}
}

// mcpTokenKey holds, in the context of a request to /mcp, the mcpToken
// gateMCP resolved.
type mcpTokenKey struct{}

// mcpToken is a bearer token and its caller (nil for a token that
// resolves to none).
type mcpToken struct {
	token  string
	caller *engine.Caller
}

// mcpRefuse answers a refusal at the HTTP level of /mcp as a JSON-RPC
// error: the status of its code, and its envelope's error object as data.
func (s *Server) mcpRefuse(c echo.Context, err error) {
	code, msg, extra := s.classify(err, c)
	body := make(map[string]any, len(extra)+2)
	for k, v := range extra {
		body[k] = v
	}
	body["code"], body["message"] = code, msg
	s.mcp.Refuse(c.Response(), statusOf[code], msg, body)
}

// deadlineBody lifts the read deadline once the body is read, so that it
// never cuts a call whose tool runs longer (see Server.readBody).
type deadlineBody struct {
	io.ReadCloser
	rc *http.ResponseController
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// verifyMCP is MCPHost.Verify: the caller gateMCP resolved token to.
// Anything else, a token gateMCP did not resolve (the endpoint reads the
// header otherwise than the API, or the request did not pass gateMCP)
// included, is nil, an unknown token: the token is never resolved twice.
func (au *authenticator) verifyMCP(r *http.Request, token string) *engine.Caller {
	if t, ok := r.Context().Value(mcpTokenKey{}).(mcpToken); ok && t.caller != nil && t.token == token {
		return t.caller
	}
	return nil
}

// admitMCP applies the principal's rate limit to one JSON-RPC message of
// /mcp (every method counts, and each entry of a batch).
func (s *Server) admitMCP(caller *engine.Caller) error {
	if err, wait := s.overRate(caller); err != nil {
		return &rateRefusal{err: err, wait: wait}
	}
	return nil
}

// rateRefusal is RATE_LIMITED with the time until the principal may send
// again (its RetryAfter, which MCPHost.Admit's errors may have).
type rateRefusal struct {
	err  *Error
	wait time.Duration
}

func (r *rateRefusal) Error() string { return r.err.Error() }

// Unwrap gives the RATE_LIMITED *Error: its code and fields.
func (r *rateRefusal) Unwrap() error { return r.err }

// RetryAfter is the time until the principal may send again.
func (r *rateRefusal) RetryAfter() time.Duration { return r.wait }

// observeMCP counts and logs one tools/call of /mcp, through the same
// counting and call log as POST /v1/tools/call (countCall,
// logCallEntry).
func (s *Server) observeMCP(ctx context.Context, c MCPCall) {
	outcome := OutcomeRan
	switch {
	case c.Code != "":
		outcome = outcomeOfCode(c.Code)
	case c.Replayed:
		outcome = OutcomeReplayed
	case c.Passthrough:
		outcome = OutcomePassthrough
	}
	s.countCall(TransportMCP, outcome, c.Took)
	if c.StoreDetail != "" {
		s.log.Warn("the store failed", slog.String("method", "tools/call"), slog.String("tool", c.Tool), slog.String("err", c.StoreDetail))
	}
	e := callEntry{transport: TransportMCP, principal: c.Principal, tool: c.Tool,
		requestID: c.RequestID, session: c.SessionID, executionID: c.ExecutionID, status: c.Status,
		code: c.Code, outcome: outcome, took: c.Took}
	s.logCallEntry(ctx, e)
	if tracing.On() {
		traceCall(tracing.SpanFrom(ctx), e)
	}
}
