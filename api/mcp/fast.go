package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/internal/jsonscan"
	"github.com/carmyhq/carmy/internal/mcpversion"
)

// The fast path of tools/call.
//
// The SDK's stateless Streamable HTTP handler serves each request with a
// server session of its own (a jsonrpc2 connection, its goroutines and
// channels) and decodes the body five times over (as a batch, as a
// message twice, its _meta twice, its params), each time through a
// decoder that allocates a fresh 32 KiB buffer: about 330 KB and 270
// allocations a tools/call, several times the cost of POST /v1/tools/call
// (BenchmarkMCPCall and BenchmarkHTTPCall in package api). At 2026-07-28
// it decodes more: the _meta again for the protocol version, the
// client's capabilities and name (each re-encoded, then decoded), and the
// params twice for the Mcp-Name header.
//
// The fast path answers the one request that matters for throughput, a
// single tools/call of a version it serves, itself, and hands every
// other request, unchanged, to the SDK. It answers only a request the SDK
// would serve exactly so, and answers it as the SDK does:
//
//   - it serves only a request that passes every check the SDK's handler
//     makes before it reaches the method (the Host of a loopback node
//     without auth, the Mcp-Protocol-Version header, the method,
//     Content-Type, Accept, Last-Event-ID, the body's size), with the
//     SDK's own rules (copied below), at versions 2025-06-18 and
//     2025-11-25, for which the SDK checks no Mcp-Method or Mcp-Name
//     header and reads no _meta of its own, and 2026-07-28, with the
//     checks of fast_meta.go besides;
//   - it serves only a body in a plain subset of JSON, on which any JSON
//     decoder agrees: one object, valid UTF-8, no escaped surrogate, no
//     number with an exponent or over 15 characters, nesting at most 64
//     deep, no duplicate member, no member beyond jsonrpc, id, method and
//     params (and name, arguments and _meta in params), jsonrpc "2.0",
//     method "tools/call", an id that is a string or an integer, a
//     string name, params and _meta objects, and no _meta key of the
//     protocol's own (io.modelcontextprotocol/…) but, at 2026-07-28, the
//     four a client sends with every request (fast_meta.go);
//   - it runs the call through the same middleware as the SDK does
//     (Observe, and callTool, where the runtime decides the allow-list
//     and the tool), with the request the SDK would have built (but for
//     the protocol's _meta keys, which it leaves out: Carmy never reads
//     them, meta.go), and finishes the result as Server.callTool does
//     (runTool);
//   - it writes the answer in the bytes and with the headers the SDK
//     writes (Content-Type application/json, Cache-Control): a result of
//     the shape Carmy's tools give in one pass (fast_encode.go), anything
//     else with the SDK's own encoders; at 2026-07-28 it adds to a result
//     what the SDK adds (fast_meta.go).
//
// TestFastPathMatchesSDK, TestFastPathMatchesSDKNewProtocol and
// FuzzFastPathMatchesSDK send requests through both paths and compare
// the answers byte for byte.

// methodCallTool is the method the fast path serves.
const methodCallTool = "tools/call"

// Limits of the plain JSON the fast path reads.
const (
	fastMaxDepth  = 64
	fastMaxNumber = 15 // characters: every such integer is exact as a float64
)

// protocolMetaPrefix begins the _meta keys the SDK reads itself.
var protocolMetaPrefix = []byte("io.modelcontextprotocol/")

// fastRequest is the request of one call on the fast path, the SDK's
// request and its parts in one allocation, and what fastTool tells of it.
// The call's context holds it in place of its JSON-RPC id (rpcIDOf).
type fastRequest struct {
	req    sdk.CallToolRequest
	params sdk.CallToolParamsRaw
	extra  sdk.RequestExtra
	rpcID  json.RawMessage
	// ran says the tool handler answered with a result (Server.callTool
	// marks such a result complete at 2026-07-28).
	ran bool
}

// fastTool is the method handler at the end of the fast path's chain
// (Handler.fastChain, middleware over it): runTool, which also notes in
// the call's fastRequest whether the tool handler answered.
func (h *Handler) fastTool(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
	res, err := h.runTool(ctx, method, req)
	if fr, ok := ctx.Value(rpcIDKey{}).(*fastRequest); ok {
		fr.ran = err == nil && res != nil
	}
	return res, err
}

// serveFast answers call, a tools/call read from r's body by
// parseFastCall whose raw JSON-RPC id is rpcID, as the SDK would.
func (h *Handler) serveFast(w http.ResponseWriter, r *http.Request, call fastCall, rpcID json.RawMessage) {
	h.fastServed.Add(1)
	ctx := r.Context()
	fr := &fastRequest{
		params: sdk.CallToolParamsRaw{Name: call.name, Arguments: call.args, Meta: call.meta},
		extra:  sdk.RequestExtra{TokenInfo: auth.TokenInfoFromContext(ctx), Header: r.Header},
		rpcID:  rpcID,
	}
	fr.req.Params, fr.req.Extra = &fr.params, &fr.extra
	res, err := h.fastChain(context.WithValue(ctx, rpcIDKey{}, fr), methodCallTool, &fr.req)
	ran := fr.ran
	bufp := answerBufs.Get().(*[]byte)
	defer func() {
		if cap(*bufp) <= maxPooledAnswer {
			answerBufs.Put(bufp)
		}
	}()
	var data []byte
	var status int
	if cr, isCall := res.(*sdk.CallToolResult); err == nil && isCall {
		var info json.RawMessage
		if call.newProtocol {
			info = h.implJSON
		}
		var ok bool
		if data, ok = appendAnswer((*bufp)[:0], call.id, cr, info, call.newProtocol && ran); ok {
			*bufp = data
		} else {
			data = nil
		}
	}
	if data == nil {
		data, status = h.encodeAnswer(call, res, err, ran)
	}
	hdr := w.Header()
	hdr["Cache-Control"] = cacheControlValue
	hdr["Content-Type"] = contentTypeJSON
	if status != 0 {
		w.WriteHeader(status)
	}
	_, _ = w.Write(data)
}

// The values of the headers of a fast answer, shared: a header's value
// is never changed in place (Header.Set and Add replace or grow it).
var (
	cacheControlValue = []string{"no-cache, no-transform"}[:1:1]
	contentTypeJSON   = []string{"application/json"}[:1:1]
)

// encodeAnswer is the answer to call with the SDK's encoders (the
// result's, then the JSON-RPC envelope's), for what appendAnswer does not
// encode: an error, or a result of another shape. status is the HTTP
// status of a JSON-RPC error at 2026-07-28 (errorStatus), else 0.
func (h *Handler) encodeAnswer(call fastCall, res sdk.Result, err error, ran bool) (data []byte, status int) {
	resp := &jsonrpc.Response{ID: call.id, Error: err}
	if err == nil {
		var raw json.RawMessage
		var mErr error
		if call.newProtocol {
			raw, mErr = h.newProtocolResult(res, ran)
		} else {
			raw, mErr = jsonscan.MarshalNoHTML(res)
		}
		if mErr != nil {
			// The SDK logs this and answers nothing; a result Carmy
			// builds always encodes.
			h.log.Error("mcp: a tools/call result does not encode", "err", mErr)
			resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
		} else {
			resp.Result = raw
		}
	}
	data, err = jsonrpc.EncodeMessage(resp)
	if err != nil {
		h.log.Error("mcp: a tools/call answer does not encode", "err", err)
		data = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	if call.newProtocol {
		status = errorStatus(resp.Error)
	}
	return data, status
}

// runTool is the SDK's Server.callTool after middleware ran the call:
// the tool handler's result (handOver), never "null" content.
func (h *Handler) runTool(ctx context.Context, _ string, req sdk.Request) (sdk.Result, error) {
	res, err := h.handOver(ctx, req.(*sdk.CallToolRequest))
	if err != nil {
		return nil, err
	}
	if res.Content == nil {
		res.Content = []sdk.Content{} // as the SDK does: never "null"
	}
	return res, nil
}

// fastEligible reports whether r passes the checks the SDK's handler
// makes before it reads the body, with the SDK's own rules, for a
// version the fast path serves.
func (h *Handler) fastEligible(r *http.Request) bool {
	if !h.disableLocalhostProtection {
		if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil &&
			isLoopback(local.String()) && !isLoopback(r.Host) {
			return false
		}
	}
	if f, ok := mcpversion.Lookup(r.Header.Get("Mcp-Protocol-Version")); !ok || !f.FastPath || r.Method != http.MethodPost {
		return false
	}
	if !isJSONType(r.Header.Get("Content-Type")) {
		return false
	}
	if jsonOK, streamOK := accepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
		return false
	}
	return len(r.Header.Values("Last-Event-ID")) == 0 && r.Body != nil
}

// readBody reads r's body if it is within the limit. Otherwise, or on an
// error, it puts back what it read in front of the rest (or of the
// error), for the SDK to read and refuse as it does.
func (h *Handler) readBody(r *http.Request) ([]byte, bool) {
	orig := r.Body
	body, err := io.ReadAll(io.LimitReader(orig, h.cfg.BodyLimit+1))
	if err != nil || int64(len(body)) > h.cfg.BodyLimit || len(body) == 0 {
		r.Body = restoredBody(body, err, orig)
		return nil, false
	}
	return body, true
}

// restoredBody reads read, then err when there was one, else the rest of
// orig; it closes orig.
func restoredBody(read []byte, err error, orig io.ReadCloser) io.ReadCloser {
	rest := io.Reader(orig)
	if err != nil {
		rest = errReader{err}
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(read), rest), orig}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// accepts is the SDK's streamableAccepts: whether Accept admits JSON and
// an event stream.
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for rest, more := value, true; more; {
			var raw string
			raw, rest, more = strings.Cut(rest, ",")
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// isLoopback is the SDK's check of a loopback address or Host.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// fastCall is a tools/call the fast path serves.
type fastCall struct {
	id   jsonrpc.ID
	name string
	args json.RawMessage
	meta sdk.Meta // nil when params has no _meta
	// newProtocol says the call is of 2026-07-28, whose _meta may hold
	// the protocol's keys of fast_meta.go; proto holds their raw values.
	newProtocol bool
	proto       protocolMeta
}

// isInteger reports whether v is an integer as JSON writes it
// (-?(0|[1-9][0-9]*)): an id the fast path reads as a number.
func isInteger(v []byte) bool {
	if len(v) > 0 && v[0] == '-' {
		v = v[1:]
	}
	if len(v) == 0 || (v[0] == '0' && len(v) > 1) {
		return false
	}
	for _, b := range v {
		if b < '0' || b > '9' {
			return false
		}
	}
	return true
}

// parseFastCall reads body, valid JSON (serveOne checked it), as a
// tools/call of the plain JSON the fast path serves (see the top of this
// file), or returns false. newProtocol says the request is of 2026-07-28.
func parseFastCall(body []byte, newProtocol bool) (fastCall, bool) {
	c := fastCall{newProtocol: newProtocol}
	if !plainJSON(body) {
		return c, false
	}
	var have [4]bool // jsonrpc, id, method, params
	var params json.RawMessage
	ok := members(body, func(key []byte, v json.RawMessage) bool {
		switch string(key) {
		case "jsonrpc":
			have[0] = string(v) == `"2.0"`
			return have[0]
		case "id":
			id, ok := idOf(v)
			c.id, have[1] = id, ok
			return ok
		case "method":
			have[2] = string(v) == `"`+methodCallTool+`"`
			return have[2]
		case "params":
			params, have[3] = v, len(v) > 0 && v[0] == '{'
			return have[3]
		}
		return false
	})
	if !ok || have != [4]bool{true, true, true, true} {
		return c, false
	}
	var named bool
	ok = members(params, func(key []byte, v json.RawMessage) bool {
		switch string(key) {
		case "name":
			c.name, named = stringOf(v)
			return named
		case "arguments":
			c.args = v
			return true
		case "_meta":
			if len(v) == 0 || v[0] != '{' {
				return false
			}
			c.meta = make(sdk.Meta, 4)
			return members(v, func(key []byte, v json.RawMessage) bool {
				if bytes.HasPrefix(key, protocolMetaPrefix) {
					// Left out of the request: Carmy reads only its own
					// keys (meta.go); fast_meta.go checks them.
					return newProtocol && c.proto.note(key, v)
				}
				val, ok := valueOf(v)
				if ok {
					c.meta[metaKey(key)] = val
				}
				return ok
			})
		}
		return false
	})
	return c, ok && named
}

// metaKey is key as a string, Carmy's own keys without an allocation.
func metaKey(key []byte) string {
	switch string(key) {
	case MetaRequestID:
		return MetaRequestID
	case MetaSessionID:
		return MetaSessionID
	case MetaMetadata:
		return MetaMetadata
	case MetaTimeoutMS:
		return MetaTimeoutMS
	}
	return string(key)
}

// stringOf decodes v, valid plain JSON, as encoding/json decodes it into
// a string, or returns false when it is no string; one without escapes
// directly.
func stringOf(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	return s, json.Unmarshal(v, &s) == nil
}

// valueOf decodes v, valid plain JSON, as encoding/json decodes it into
// an any; a string without escapes directly.
func valueOf(v json.RawMessage) (any, bool) {
	if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	var val any
	return val, json.Unmarshal(v, &val) == nil
}

// idOf reads a JSON-RPC id the fast path serves: a string, or an integer
// (which the SDK reads through a float64, exact at this length).
func idOf(v json.RawMessage) (jsonrpc.ID, bool) {
	if s, ok := stringOf(v); ok {
		id, err := jsonrpc.MakeID(s)
		return id, err == nil
	}
	if !isInteger(v) {
		return jsonrpc.ID{}, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(float64(n))
	return id, err == nil
}

// members calls fn with each member of the JSON object raw, in order, and
// reports whether raw is one object (and nothing after it), with no key
// twice, whose every member fn accepted. raw must be valid JSON (see
// parseFastCall): the one JSON scanner (jsonscan.ObjectMembers) splits
// it. The key fn is given is only valid during the call (it may point
// into raw); a key with an escape is decoded first.
func members(raw []byte, fn func(key []byte, v json.RawMessage) bool) bool {
	var buf [16]jsonscan.Member
	ms, ok := jsonscan.ObjectMembers(buf[:0], raw)
	if !ok {
		return false
	}
	var seenBuf [16][]byte
	seen := seenBuf[:0]
	for _, m := range ms {
		key := m.Name[1 : len(m.Name)-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			decoded, _, err := jsonscan.AppendUnquoted(nil, m.Name, 0)
			if err != nil {
				return false
			}
			key = decoded
		}
		for _, k := range seen {
			if bytes.Equal(k, key) {
				return false
			}
		}
		seen = append(seen, key)
		if !fn(key, m.Value) {
			return false
		}
	}
	return true
}

// plainJSON reports whether body keeps to the plain JSON on which decoders
// agree: valid UTF-8, no escaped surrogate, no number with an exponent or
// longer than fastMaxNumber, nesting at most fastMaxDepth. It does not
// check the syntax (members does).
func plainJSON(body []byte) bool {
	if !utf8.Valid(body) {
		return false
	}
	depth, number := 0, 0
	for i := 0; i < len(body); i++ {
		b := body[i]
		if b == '"' {
			number = 0
			for i++; i < len(body) && body[i] != '"'; i++ {
				if body[i] != '\\' {
					continue
				}
				i++
				if i < len(body) && body[i] == 'u' && i+2 < len(body) &&
					(body[i+1] == 'd' || body[i+1] == 'D') && strings.IndexByte("89abcdefABCDEF", body[i+2]) >= 0 {
					return false
				}
			}
			continue
		}
		switch {
		case b == '{' || b == '[':
			if depth++; depth > fastMaxDepth {
				return false
			}
		case b == '}' || b == ']':
			depth--
		case b == 'e' || b == 'E':
			if number > 0 {
				return false
			}
		case b == '-' || b == '+' || b == '.' || (b >= '0' && b <= '9'):
			if number++; number > fastMaxNumber {
				return false
			}
			continue
		}
		number = 0
	}
	return true
}
