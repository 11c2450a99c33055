package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/egress"
	"github.com/carmyhq/carmy/internal/tracing"
)

// The _meta keys of an upstream tools/call (docs/mcp.md#carmy-in-front-of-mcp-servers-the-gateway).
const (
	MetaExecutionID    = "carmy/execution_id"
	MetaRequestID      = "carmy/request_id"
	MetaIdempotencyKey = "carmy/idempotency_key"
	MetaFencingToken   = "carmy/fencing_token"
)

// maxErrorText bounds the upstream text kept in a failed result's message.
const maxErrorText = 4 << 10

// effects is what repeating upstream tool t does: as the operator set it
// (Config.Effects), else as its annotations say when the server is
// trusted (Config.TrustAnnotations), else engine.EffectsOnce.
func (u *Upstream) effects(t *mcp.Tool) engine.Effects {
	if e, ok := u.cfg.Effects[t.Name]; ok {
		return e
	}
	if !u.cfg.TrustAnnotations || t.Annotations == nil {
		return engine.EffectsOnce
	}
	a := t.Annotations
	return engine.EffectsOf(a.ReadOnlyHint, a.IdempotentHint)
}

// spec returns the engine tool of an upstream tool, listed with its
// title, schemas, annotations and _meta.
func (u *Upstream) spec(t *mcp.Tool) (engine.ToolSpec, error) {
	spec := engine.ToolSpec{
		Name:             u.cfg.Name + "." + t.Name,
		Title:            t.Title,
		Description:      t.Description,
		Timeout:          u.cfg.Timeout,
		RequireRequestID: u.cfg.RequireRequestID,
		DedupeWindow:     u.cfg.DedupeWindow,
		ProbeGiveUp:      u.cfg.ReconcileGiveUp,
		Func:             u.callFunc(t.Name),
		MarksSent:        true, // through the call's state (callState.onSent)
		Effects:          u.effects(t),
		RetryUncertain:   u.cfg.RetryUncertain[t.Name],
		Approval:         u.cfg.Approval[t.Name],
	}
	if u.cfg.ReconcileTool != "" {
		spec.Probe = u.reconcileFunc(t.Name)
	}
	if t.InputSchema != nil {
		raw, err := json.Marshal(t.InputSchema)
		if err != nil {
			return spec, fmt.Errorf("input schema: %w", err)
		}
		spec.InputSchema = raw
	}
	if t.Annotations != nil {
		raw, err := json.Marshal(t.Annotations)
		if err != nil {
			return spec, fmt.Errorf("annotations: %w", err)
		}
		spec.Annotations = raw
	}
	if t.OutputSchema != nil {
		raw, err := json.Marshal(t.OutputSchema)
		if err != nil {
			return spec, fmt.Errorf("output schema: %w", err)
		}
		if len(raw) > 0 && raw[0] == '{' {
			spec.OutputSchema = raw
		} else {
			// A schema such as true says nothing a client could use:
			// the tool is listed without it rather than left out.
			u.log.Warn("mcp server: a tool's output schema is not a JSON object; listing the tool without it", slog.String("tool", t.Name))
		}
	}
	if len(t.Meta) > 0 {
		raw, err := json.Marshal(t.Meta)
		if err != nil {
			return spec, fmt.Errorf("_meta: %w", err)
		}
		spec.Meta = raw
	}
	return spec, engine.CheckTool(spec)
}

// callFunc returns the tool body that calls the upstream tool name.
func (u *Upstream) callFunc(name string) engine.ToolFunc {
	return func(ctx context.Context, c engine.Call) (any, error) {
		cn := u.current()
		if cn == nil {
			// Known to be down: nothing is sent, and the call is released.
			return nil, &engine.NotSentError{Reason: "the upstream MCP server is not connected"}
		}
		meta := mcp.Meta{MetaExecutionID: c.ExecutionID}
		if c.RequestID != "" {
			meta[MetaRequestID] = c.RequestID
			meta[MetaIdempotencyKey] = c.IdempotencyKey
			meta[MetaFencingToken] = c.FencingToken
		}
		tracing.InjectMeta(ctx, meta) // the tool's span: the upstream joins the call's trace
		if sink := engine.ProgressSink(ctx); sink != nil {
			// The caller listens: ask the upstream for progress, under a
			// token of this call's own (progress.go).
			token := u.progress.add(sink)
			defer func() {
				u.progress.settle()
				u.progress.remove(token)
			}()
			meta["progressToken"] = token
		}
		params := &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(c.Arguments), Meta: meta}
		res, err := u.send(ctx, cn, c, params)
		if errors.Is(err, errSessionGone) {
			// Refused unread: nothing ran, so the call goes once more, on
			// the session that replaces the lost one (session.go).
			if next := u.reconnected(ctx, cn); next != nil {
				u.log.Info("mcp server: sending the call again on a new session", slog.String("tool", c.Tool),
					slog.String("execution_id", c.ExecutionID))
				res, err = u.send(ctx, next, c, params)
			}
		}
		if err != nil {
			return nil, err
		}
		if res.IsError {
			return nil, &engine.ToolError{Code: engine.CodeUpstreamToolError, Message: u.errorText(res.Content)}
		}
		if res.StructuredContent != nil {
			return u.redactValue(res.StructuredContent)
		}
		content := res.Content
		if content == nil {
			content = []mcp.Content{}
		}
		return u.redactValue(map[string]any{"content": content})
	}
}

// send sends the tools/call of c on cn and returns its result, or the
// tool's error when it got none (failed).
func (u *Upstream) send(ctx context.Context, cn *conn, c engine.Call, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	st := &callState{call: c, onSent: engine.SentFunc(ctx)}
	defer st.done.Store(true)
	// A call that ends by its context (its timeout, a cancellation)
	// before its answer: the SDK sends notifications/cancelled, and a
	// stdio child must show it still answers. The AfterFunc covers a
	// call stuck in writing to a child that does not read; the check
	// on return, a call that returned as its context ended (stop may
	// win the race with the AfterFunc then).
	stop := context.AfterFunc(ctx, func() { u.probe(cn) })
	defer func() {
		if !stop() || ctx.Err() != nil {
			u.probe(cn)
		}
	}()
	res, err := cn.cs.CallTool(withCall(ctx, st), params)
	if st.tooLarge.Load() {
		u.log.Warn("mcp server: an answer is larger than the bound", slog.String("tool", c.Tool),
			slog.String("execution_id", c.ExecutionID), slog.Int("bound", u.maxAnswer))
		return nil, &engine.ToolError{Code: engine.CodeResultTooLarge,
			Message: fmt.Sprintf("tool %s: the upstream MCP server's answer is larger than %d bytes", c.Tool, u.maxAnswer)}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, u.failed(c, err, st)
	}
	return res, nil
}

// failed turns a tools/call that got no result into the tool's error, and
// logs its detail: UPSTREAM_TOOL_ERROR for the upstream's JSON-RPC error
// answer; else (docs/guarantees.md), an *engine.NotSentError when the
// upstream cannot have acted on the request — not one byte of it left
// this node, or the upstream refused it unread because it no longer knows
// the session (wrapping errSessionGone; session.go) — so the reservation
// is released, or an *engine.AnswerLostError when some of it may have
// been read (the execution is interrupted).
func (u *Upstream) failed(c engine.Call, err error, st *callState) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) && !localCode(we.Code) {
		// The upstream answered with a JSON-RPC error: it was reached.
		u.log.Warn("mcp server: the call was refused", slog.String("tool", c.Tool), slog.String("execution_id", c.ExecutionID),
			slog.Int64("rpc_code", we.Code), slog.String("err", u.redactor.Redact(we.Message)))
		return &engine.ToolError{Code: engine.CodeUpstreamToolError,
			Message: clip(u.redactor.Redact(we.Message)), Details: map[string]any{"rpc_code": we.Code}}
	}
	kind := egress.Describe(err)
	if sessionRefused(err, st) {
		u.log.Warn("mcp server: the upstream no longer knows the session; the call was refused unread", slog.String("tool", c.Tool),
			slog.String("execution_id", c.ExecutionID), slog.String("target", u.target), slog.String("err", egress.Detail(err, u.redactor)))
		return &engine.NotSentError{Reason: "the upstream MCP server refused it unread: it no longer knows this node's session (it restarted?)",
			Err: fmt.Errorf("%w: %w", errSessionGone, err)}
	}
	if !st.sent() {
		u.log.Warn("mcp server: the upstream could not be reached, nothing was sent", slog.String("tool", c.Tool), slog.String("execution_id", c.ExecutionID),
			slog.String("target", u.target), slog.String("err", egress.Detail(err, u.redactor)))
		return &engine.NotSentError{Reason: "the upstream MCP server could not be reached: " + kind, Err: err}
	}
	u.log.Warn("mcp server: the request was sent, but no answer came", slog.String("tool", c.Tool), slog.String("execution_id", c.ExecutionID),
		slog.String("target", u.target), slog.String("err", egress.Detail(err, u.redactor)))
	return &engine.AnswerLostError{Reason: "no answer came from the upstream MCP server: " + kind, Err: err}
}

// localCode reports whether a JSON-RPC error code is one the client side
// makes up (a closing connection, a rejected write) rather than the
// upstream's answer.
func localCode(code int64) bool {
	switch code {
	case -32003, -32004, -32005: // client closing, server closing, rejected by the transport
		return true
	}
	return false
}

// errorText returns the text content of a tool error, redacted and cut.
func (u *Upstream) errorText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	if len(parts) == 0 {
		return "the upstream tool failed (its answer has no text)"
	}
	return clip(u.redactor.Redact(strings.Join(parts, "\n")))
}

// clip cuts s to maxErrorText bytes, at a rune boundary.
func clip(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	b := []byte(s[:maxErrorText])
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	return string(b) + "…"
}
