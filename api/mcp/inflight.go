package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/carmyhq/carmy/api/mcp/internal/fastpath"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/jsonscan"
	"github.com/carmyhq/carmy/store"
)

// Cancelling a call in flight (docs/mcp.md#cancelling): a notifications/cancelled
// names the JSON-RPC id of a request. Over stateless HTTP the id alone
// names nothing (every client numbers its own requests), so a
// notification cancels a tools/call only when the node that receives it
// is serving a call with that id from the same sender (sender.go): the
// same principal, Carmy session (carmy/session_id, else the
// Carmy-Session-Id header, else ""), MCP transport session
// (Mcp-Session-Id, else "") and kind of protocol version (2026-07-28 and
// later, or older). It cancels it as POST /v1/executions/{id}/cancel
// does: cancelled is recorded and the tool's context ends (an upstream
// MCP server is sent notifications/cancelled in turn, by the gateway).
// A call without request_id has no record: its tool is cancelled all the
// same, and its answer says cancelled. A notification that names nothing
// is ignored, as MCP says. Tasks are cancelled with tasks/cancel instead.
// A call whose client went away before its answer stays in the table a
// while, or is cancelled at once at 2026-07-28 (detached.go).

// inflight is the table of the tools/calls this node serves, by
// sender and JSON-RPC id: the calls of one key in a list
// (newest first), and the calls whose client went away, kept a while
// (detached, oldest first: detached.go). It is safe for concurrent use.
type inflight struct {
	mu       sync.Mutex
	calls    map[inflightKey]*inflightCall
	detached []*inflightCall
}

type inflightKey struct {
	sender
	id string
}

// inflightCall is one call in the table (a tools/call of h's, by caller):
// its execution once reserved, and whether a cancel came first.
type inflightCall struct {
	h      *Handler
	caller *engine.Caller
	key    inflightKey
	next   *inflightCall // the table's next call of the same key
	// streamCancels says the client's closing the response stream
	// cancels the call (its protocol version's rule: detached.go).
	streamCancels bool
	until         time.Time // when detached: when it leaves the table

	mu        sync.Mutex
	execID    string
	recorded  bool
	cancelled bool
}

// add registers c under its key.
func (t *inflight) add(c *inflightCall) {
	t.mu.Lock()
	if t.calls == nil {
		t.calls = make(map[inflightKey]*inflightCall)
	}
	c.next = t.calls[c.key]
	t.calls[c.key] = c
	t.mu.Unlock()
}

// remove takes c out of the table.
func (t *inflight) remove(c *inflightCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(c)
}

// removeLocked is remove with t.mu held.
func (t *inflight) removeLocked(c *inflightCall) {
	head := t.calls[c.key]
	switch {
	case head == c && c.next == nil:
		delete(t.calls, c.key)
		return
	case head == c:
		t.calls[c.key] = c.next
		return
	}
	for p := head; p != nil; p = p.next {
		if p.next == c {
			p.next = c.next
			return
		}
	}
}

// cancelAll cancels the calls registered under k (the detached ones
// whose time is not up among them), and reports how many there were.
func (t *inflight) cancelAll(k inflightKey) int {
	t.mu.Lock()
	t.expire(time.Now())
	var list []*inflightCall
	for c := t.calls[k]; c != nil; c = c.next {
		list = append(list, c)
	}
	t.mu.Unlock()
	for _, c := range list {
		c.cancelNow()
	}
	return len(list)
}

// reserved is the call's engine.Request.OnReserved: the execution is
// known, and a cancel that came before it takes effect now.
func (c *inflightCall) reserved(rec store.Record) {
	c.mu.Lock()
	c.execID, c.recorded = rec.ExecutionID, rec.Key.RequestID != ""
	cancelled := c.cancelled
	c.mu.Unlock()
	if cancelled {
		go c.h.cancelExecution(*c.caller, rec.ExecutionID, c.recorded)
	}
}

// cancelNow cancels the call's execution, or marks the call for its
// reservation to cancel.
func (c *inflightCall) cancelNow() {
	c.mu.Lock()
	already := c.cancelled
	c.cancelled = true
	id, recorded := c.execID, c.recorded
	c.mu.Unlock()
	if !already && id != "" {
		c.h.cancelExecution(*c.caller, id, recorded)
	}
}

// done takes the call out of its handler's table.
func (c *inflightCall) done() { c.h.inflight.remove(c) }

// track registers a tools/call of ctx (its JSON-RPC id is in ctx, from
// serveOne) for caller, made by a request of header (its transport
// session) at protocol version, and sets call.OnReserved; the returned
// call must be told how Runtime.Call ended (ended). A call without an id
// (or a task) is not tracked: nil.
func (h *Handler) track(ctx context.Context, caller *engine.Caller, call *engine.Request, header http.Header, version string) *inflightCall {
	id := rpcIDOf(ctx)
	if id == "" {
		return nil
	}
	c := &inflightCall{h: h, caller: caller, key: inflightKey{senderOf(caller.Principal, call.SessionID, header, version), id},
		streamCancels: closedStreamCancels(version)}
	h.inflight.add(c)
	call.OnReserved = c.reserved
	return c
}

// cancelExecution cancels a call's execution as POST …/cancel does, or
// the tool of one that is not recorded.
func (h *Handler) cancelExecution(caller engine.Caller, execID string, recorded bool) {
	if !recorded {
		if rc, ok := h.cfg.Runtime.(runCanceller); ok {
			rc.CancelRun(execID)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	if _, err := h.cfg.Runtime.Cancel(ctx, caller, execID); err != nil && store.CodeOf(err) != store.CodeInvalidState {
		h.log.Warn("mcp: notifications/cancelled: the cancel failed", slog.String("execution_id", execID), slog.Any("err", err))
	}
}

// cancelTimeout bounds the cancel a notification makes.
const cancelTimeout = 10 * time.Second

// serveCancelled answers a notifications/cancelled (202, no body) after
// cancelling the call it names, if this node serves one from its sender.
func (h *Handler) serveCancelled(w http.ResponseWriter, r *http.Request, p ownParams) {
	caller := callerOfRequest(r, h.cfg.Anonymous)
	if caller != nil && len(p.RequestID) > 0 {
		session := r.Header.Get(SessionHeader)
		if s, ok := p.Meta[MetaSessionID].(string); ok {
			session = s
		}
		from := senderOf(caller.Principal, session, r.Header, versionOf(r, p.Meta))
		if n := h.inflight.cancelAll(inflightKey{from, canonicalID(p.RequestID)}); n > 0 {
			h.log.Info("mcp: notifications/cancelled cancelled a call", slog.String("principal", caller.Principal),
				slog.String("session_id", session), slog.String("mcp_session_id", from.transport), slog.String("request", string(p.RequestID)))
		}
	}
	w.WriteHeader(http.StatusAccepted)
}

// canonicalID spells a JSON-RPC id one way: a string as its JSON text, a
// number as the number it is (1 and 1.0 are one id).
func canonicalID(raw json.RawMessage) string {
	if isShortInteger(raw) {
		return string(raw) // as encoding/json writes its float64
	}
	if len(raw) > 0 && raw[0] != '"' {
		var f float64
		if json.Unmarshal(raw, &f) == nil {
			b, _ := json.Marshal(f)
			return string(b)
		}
	}
	return string(raw)
}

// isShortInteger reports an integer of at most 15 digits, not -0: a
// float64 exactly, which encoding/json writes digit for digit.
func isShortInteger(raw []byte) bool {
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	return len(digits) <= 15 && jsonscan.IsInteger(raw) && string(raw) != "-0"
}

// rpcIDKey holds the canonicalID of the JSON-RPC id of the tools/call
// the SDK serves; the fast path's call holds its id raw (fastpath.RPCID).
type rpcIDKey struct{}

// withRPCID keeps the JSON-RPC id of the tools/call being served.
func withRPCID(ctx context.Context, raw json.RawMessage) context.Context {
	if len(raw) == 0 {
		return ctx
	}
	return context.WithValue(ctx, rpcIDKey{}, canonicalID(raw))
}

// rpcIDOf is the canonicalID of the JSON-RPC id of the tools/call of
// ctx, "" when there is none.
func rpcIDOf(ctx context.Context) string {
	if raw := fastpath.RPCID(ctx); len(raw) > 0 {
		return canonicalID(raw)
	}
	v, _ := ctx.Value(rpcIDKey{}).(string)
	return v
}

// callerOfRequest is the caller of r: its token's, or anonymous when auth
// is off.
func callerOfRequest(r *http.Request, anonymous *engine.Caller) *engine.Caller {
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		c, _ := ti.Extra[callerKey].(*engine.Caller)
		return c
	}
	return anonymous
}
