package mcp

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/carmyhq/carmy/api/internal/strictjson"
	"github.com/carmyhq/carmy/api/mcp/internal/fastpath"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/jsonscan"
	"github.com/carmyhq/carmy/store"
)

// What every request goes through before the fast path or the SDK
// answers it (serveMCP):
//
//   - a body that is JSON is held to the HTTP API's strict JSON
//     (strictjson.Check): a member repeated at any depth (in the message,
//     its params, arguments or _meta), invalid UTF-8, a number beyond a
//     double are answered 400 with JSON-RPC error -32600 (Invalid
//     Request), whose data is the error object of docs/errors.md (INVALID_REQUEST),
//     and nothing runs. Such a message is malformed, not a call with bad
//     arguments: which of two values a decoder keeps is not defined, and
//     the SDK kept the last ({"name":"echo","name":"fail"} ran fail);
//   - a JSON-RPC batch is served by serveBatch (batch.go);
//   - every message but a tools/call counts against the principal's rate
//     (Config.Admit): over it, the answer is 429 with Retry-After and
//     JSON-RPC error CodeRateLimited. A tools/call counts in callTool,
//     which answers RATE_LIMITED as a result with isError (docs/mcp.md).

// CodeRateLimited is the JSON-RPC error code of a message other than a
// tools/call refused for the principal's rate: one of the codes JSON-RPC
// leaves to the server (-32000 to -32099). Its data is the error
// object of docs/errors.md, code RATE_LIMITED.
const CodeRateLimited = -32029

// serveMCP serves a request that authenticate let through: a POST of
// JSON is screened (above), then answered on the fast path when it can
// be, else by the SDK; anything else goes to the SDK as it came, for it
// to refuse as the transport says.
func (h *Handler) serveMCP(w http.ResponseWriter, r *http.Request) {
	if h.serveStandalone(w, r) { // a GET's stream of notifications (listen.go)
		return
	}
	if !screenable(r) {
		h.stream.ServeHTTP(w, r)
		return
	}
	body, ok := h.readBody(r)
	if !ok {
		h.stream.ServeHTTP(w, r)
		return
	}
	// One pass judges a plain body valid and strict at once
	// (strictjson.Quick); any other is checked by jsonscan.Valid, then
	// strictjson.Check, which words what is wrong.
	checked := strictjson.Quick(body)
	valid := checked || jsonscan.Valid(body)
	if valid {
		if err := strictCheck(body, checked); err != nil {
			writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest,
				"the message is not strict JSON (I-JSON, RFC 7493): "+strictjson.Reason(err), envelope(store.CodeInvalidRequest, nil,
					"the message is not strict JSON (I-JSON, RFC 7493): "+strictjson.Reason(err)))
			return
		}
		if b := body[jsonscan.SkipSpace(body, 0)]; b == '[' {
			h.serveBatch(w, r, body)
			return
		}
	}
	h.serveOne(w, r, body, valid)
}

// serveOne answers one message, body, read from r (whose body it
// replaces when the SDK is to read it); valid says whether body is valid
// JSON (then strict JSON too).
//
// A tools/call is served under a context that holds its JSON-RPC id
// (withRPCID, or fastpath.RPCID on the fast path): the request is
// copied with that context only for the handlers that take a request
// (serveOwn, the SDK), not for the fast path.
func (h *Handler) serveOne(w http.ResponseWriter, r *http.Request, body []byte, valid bool) {
	if valid {
		var rpcID json.RawMessage
		if isCallTool(body) {
			rpcID = idOfMessage(body)
		} else if err := h.admit(r); err != nil {
			h.refuseRate(w, idOfMessage(body), err)
			return
		}
		withID := false
		if mayBeOwn(body) {
			r, withID = requestWithRPCID(r, rpcID), true
			if h.serveOwn(w, r, body) {
				return
			}
		}
		if !h.noFastPath && h.fast.Serve(w, r, body, rpcID) {
			return
		}
		if !withID {
			r = requestWithRPCID(r, rpcID)
		}
	}
	r.Body = restoredBody(body, nil, r.Body)
	h.stream.ServeHTTP(w, r)
}

// requestWithRPCID is r with the JSON-RPC id raw in its context
// (withRPCID); r itself when raw is nil.
func requestWithRPCID(r *http.Request, raw json.RawMessage) *http.Request {
	if len(raw) == 0 {
		return r
	}
	return r.WithContext(withRPCID(r.Context(), raw))
}

// strictCheck is strictjson.Check of body, valid JSON, unless
// strictjson.Quick accepted it already (checked).
func strictCheck(body []byte, checked bool) error {
	if checked {
		return nil
	}
	return strictjson.Check(body)
}

// screenable reports a request the SDK would read the body of: a POST of
// application/json. Any other is refused by the SDK before it reads.
func screenable(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return false
	}
	return fastpath.IsJSONType(r.Header.Get("Content-Type"))
}

// isCallTool reports whether body, valid JSON, is a tools/call: an
// object whose method is "tools/call". Anything else (another method, a
// response, a value that is no object) is not.
func isCallTool(body []byte) bool {
	call := false
	topMembers(body, func(key, v []byte) {
		if string(key) == `"method"` {
			call = string(v) == `"`+methodCallTool+`"`
		}
	})
	return call
}

// idOfMessage returns the raw id of body, valid JSON, when it is an
// object whose id is a string or a number; nil otherwise.
func idOfMessage(body []byte) json.RawMessage {
	var id json.RawMessage
	topMembers(body, func(key, v []byte) {
		if string(key) == `"id"` && len(v) > 0 && (v[0] == '"' || v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
			id = v
		}
	})
	return id
}

// topMembers calls fn with the quoted key and the value of each member of
// body's top-level object, in order; body must be valid JSON. Keys are
// given as they are written (escapes undecoded): a key spelt with escapes
// matches no plain name, and a message whose method is so spelt is
// counted against the rate as any other.
func topMembers(body []byte, fn func(key, v []byte)) {
	var buf [8]jsonscan.Member
	ms, _ := jsonscan.ObjectMembers(buf[:0], body)
	for _, m := range ms {
		fn(m.Name, m.Value)
	}
}

// admit asks Config.Admit whether the caller of r may send one more
// message.
func (h *Handler) admit(r *http.Request) error {
	if h.cfg.Admit == nil {
		return nil
	}
	caller := h.cfg.Anonymous
	if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
		caller, _ = ti.Extra[callerKey].(*engine.Caller)
	}
	if caller == nil {
		return nil
	}
	return h.cfg.Admit(caller)
}

// RetryAfter is what an error of Config.Admit may implement: how long
// until the caller may send again (the answer's Retry-After).
type RetryAfter interface{ RetryAfter() time.Duration }

// refuseRate answers a message refused by Config.Admit: 429, Retry-After
// when err tells it, and JSON-RPC error CodeRateLimited (or -32603 for
// an error that is not RATE_LIMITED) with the error object of docs/errors.md.
func (h *Handler) refuseRate(w http.ResponseWriter, id json.RawMessage, err error) {
	code := store.CodeOf(err)
	if code != store.CodeRateLimited {
		h.log.Error("mcp: admitting a message failed", "err", err)
		writeRPCError(w, http.StatusInternalServerError, id, jsonrpc.CodeInternalError, "internal error", nil)
		return
	}
	var ra RetryAfter
	if errors.As(err, &ra) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(ra.RetryAfter().Seconds())))))
	}
	var fields map[string]any
	var f interface{ Fields() map[string]any }
	if errors.As(err, &f) {
		fields = f.Fields()
	}
	writeRPCError(w, http.StatusTooManyRequests, id, CodeRateLimited, err.Error(), envelope(code, fields, err.Error()))
}

// envelope is the error object of docs/errors.md: code, message and the extra
// fields.
func envelope(code string, fields map[string]any, message string) map[string]any {
	out := make(map[string]any, len(fields)+2)
	for k, v := range fields {
		out[k] = v
	}
	out["code"], out["message"] = code, message
	return out
}

// rpcError encodes a JSON-RPC error answer to the message of id (null
// when id is nil), with data when it is not nil.
func rpcError(id json.RawMessage, code int, message string, data any) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	type errorObject struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}
	body, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   errorObject     `json:"error"`
	}{"2.0", id, errorObject{code, message, data}})
	if err != nil {
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	return body
}

// writeRPCError answers with status and the JSON-RPC error of rpcError.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, message string, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(rpcError(id, code, message, data))
}
