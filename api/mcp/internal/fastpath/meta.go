package fastpath

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/internal/jsonscan"
)

// The fast path at 2026-07-28 (doc.go).
//
// From this version on a client sends no initialize: every request
// carries the protocol version, the client's name and its capabilities
// in _meta, and its method and tool name in the Mcp-Method and Mcp-Name
// headers. Before the method runs, the SDK checks (servePOST,
// validateMcpHeaders, validateRequestMeta in its Streamable HTTP
// handler and server session):
//
//   - _meta io.modelcontextprotocol/protocolVersion is a string equal to
//     the Mcp-Protocol-Version header, and a version the server serves;
//   - the Mcp-Method header equals the method and the Mcp-Name header
//     the tool's name (both present);
//   - the arguments bound to headers by the tool's schema (x-mcp-header)
//     match their Mcp-Param-* headers;
//   - io.modelcontextprotocol/clientCapabilities is present and decodes
//     as capabilities, and io.modelcontextprotocol/clientInfo, when
//     present, as an implementation; io.modelcontextprotocol/logLevel is
//     read and never refused.
//
// The fast path serves a call that passes each check as the SDK makes it:
// the version exactly "2026-07-28", the headers compared as the SDK
// compares them, no tool whose schema might bind a header
// (Config.Callable),
// and the capabilities and client name decoded by the SDK's own
// accessors (ServerRequest.ClientCapabilities and ClientInfo), whose
// verdict is kept per distinct pair of values (a client sends the same
// ones every time). Any other _meta key of the protocol's own leaves the
// call to the SDK.
//
// To a result the SDK adds what the new protocol asks of it: the
// server's name in _meta io.modelcontextprotocol/serverInfo (unless the
// result has one), and "resultType": "complete" to a result of the tool
// handler (the SDK's Server.callTool marks those; a refusal of the middleware is
// not one). A JSON-RPC error is answered with the HTTP status the SDK
// gives it at this version (errorStatus).

// The _meta keys of the requests and results of a stateless protocol
// version (2026-07-28; internal/mcpversion).
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaLogLevel           = "io.modelcontextprotocol/logLevel"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// resultTypeComplete is what the SDK adds to a tool handler's result at
// 2026-07-28 (the result's last member; Carmy's results have no
// inputRequests, which would follow it).
const resultTypeComplete = `,"resultType":"complete"}`

// protocolMeta holds the raw values of the protocol's own _meta keys of
// a 2026-07-28 tools/call.
type protocolMeta struct {
	version    json.RawMessage
	info, caps json.RawMessage // nil when absent
}

// note keeps the value v of the protocol's _meta key key, and reports
// whether the fast path serves a call with that key.
func (p *protocolMeta) note(key []byte, v json.RawMessage) bool {
	switch string(key) {
	case metaProtocolVersion:
		p.version = v
	case metaClientInfo:
		p.info = v
	case metaClientCapabilities:
		p.caps = v
	case metaLogLevel: // read by the SDK for notifications only
	default:
		return false
	}
	return true
}

// newProtocolEligible reports whether call, a 2026-07-28 tools/call read
// from r, passes the SDK's checks of that version (above).
func (s *Server) newProtocolEligible(r *http.Request, call fastCall) bool {
	// _meta names the version of the header (a stateless one of the
	// table, exactly: eligible), as a JSON string without escapes.
	if string(call.proto.version) != `"`+r.Header.Get("Mcp-Protocol-Version")+`"` || call.proto.caps == nil {
		return false
	}
	if r.Header.Get("Mcp-Method") != methodCallTool {
		return false
	}
	if name := r.Header.Get("Mcp-Name"); name == "" || name != call.name {
		return false
	}
	return s.cfg.Callable(call.name) && s.clientMeta.valid(call)
}

// clientMetaCache keeps the SDK's verdict on the client's capabilities
// and name, by their raw values.
type clientMetaCache struct {
	mu      sync.Mutex
	verdict map[string]bool
}

// clientMetaCacheSize bounds the verdicts kept; the cache starts over
// when it is full.
const clientMetaCacheSize = 1024

// valid reports whether the SDK reads call's capabilities and client
// name (when present) without an error.
func (c *clientMetaCache) valid(call fastCall) bool {
	var buf [512]byte
	key := append(buf[:0], call.proto.caps...)
	if call.proto.info != nil {
		key = append(append(key, 0), call.proto.info...)
	}
	c.mu.Lock()
	ok, known := c.verdict[string(key)]
	c.mu.Unlock()
	if known {
		return ok
	}
	ok = sdkReadsClientMeta(call.proto)
	c.mu.Lock()
	if c.verdict == nil || len(c.verdict) >= clientMetaCacheSize {
		c.verdict = make(map[string]bool)
	}
	c.verdict[string(key)] = ok
	c.mu.Unlock()
	return ok
}

// sdkReadsClientMeta reports whether the SDK's accessors read p's
// capabilities, and its client name when present, from the _meta the SDK
// would have decoded.
func sdkReadsClientMeta(p protocolMeta) bool {
	meta := sdk.Meta{}
	for key, raw := range map[string]json.RawMessage{metaClientCapabilities: p.caps, metaClientInfo: p.info} {
		if raw == nil {
			continue
		}
		v, ok := valueOf(raw)
		if !ok {
			return false
		}
		meta[key] = v
	}
	req := &sdk.ServerRequest[*sdk.CallToolParamsRaw]{Params: &sdk.CallToolParamsRaw{Meta: meta}}
	return req.ClientCapabilities() != nil && (p.info == nil || req.ClientInfo() != nil)
}

// newProtocolResult encodes res, the result of a 2026-07-28 tools/call,
// as the SDK does: with the server's name (serverInfo, its JSON) in its
// _meta, and, when the tool handler made it (ran), its resultType.
func newProtocolResult(res sdk.Result, serverInfo json.RawMessage, ran bool) (json.RawMessage, error) {
	cr, _ := res.(*sdk.CallToolResult)
	if cr != nil {
		if cr.Meta == nil {
			cr.Meta = sdk.Meta{}
		}
		if _, ok := cr.Meta[metaServerInfo]; !ok {
			cr.Meta[metaServerInfo] = serverInfo
		}
	}
	raw, err := jsonscan.MarshalNoHTML(res)
	if err != nil || !ran || cr == nil || cr.InputRequests != nil || len(raw) < 2 || raw[len(raw)-1] != '}' {
		return raw, err
	}
	out := make(json.RawMessage, 0, len(raw)+len(resultTypeComplete))
	out = append(out, raw[:len(raw)-1]...)
	return append(out, resultTypeComplete...), nil
}

// errorStatus is the HTTP status the SDK gives a JSON-RPC error answer
// from 2026-07-28 on (its extractErrorStatus): 404 for an unknown
// method, 400 for invalid params, an unsupported version or missing
// capabilities, else 0 (200).
func errorStatus(err error) int {
	if err == nil {
		return 0
	}
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		return 0
	}
	switch je.Code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, sdk.CodeUnsupportedProtocolVersion, sdk.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return 0
}

// NewProtocolResult encodes res, the result of a 2026-07-28 tools/call
// the endpoint answers itself (a task's, say), as the SDK encodes such a
// result: with the server's name in its _meta, and, when the tool
// handler made it (ran), its resultType.
func (s *Server) NewProtocolResult(res sdk.Result, ran bool) (json.RawMessage, error) {
	return newProtocolResult(res, s.cfg.ServerInfo, ran)
}
