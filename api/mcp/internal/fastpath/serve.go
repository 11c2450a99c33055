package fastpath

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/internal/jsonscan"
	"github.com/carmyhq/carmy/internal/mcpversion"
)

// Config is what the fast path needs of the endpoint it serves for.
type Config struct {
	// Middleware is the endpoint's receiving middleware, the one the SDK
	// runs every request through: a call on the fast path runs through
	// it too, over Tool.
	Middleware sdk.Middleware
	// Tool is the method handler at the end of the chain: what the SDK's
	// Server.callTool does after the middleware ran the call (the tool
	// handler, and the SDK's finishing of its result).
	Tool sdk.MethodHandler
	// ServerInfo is the server's sdk.Implementation as the SDK encodes
	// it, which a 2026-07-28 result carries in its _meta.
	ServerInfo json.RawMessage
	// CheckHost is the SDK's localhost protection, on (the negation of
	// StreamableHTTPOptions.DisableLocalhostProtection, as set).
	CheckHost bool
	// Callable reports whether a 2026-07-28 call of the named tool may be
	// served here: false for a tool whose input schema may bind an
	// argument to an HTTP header (x-mcp-header), which the SDK checks.
	Callable func(tool string) bool
	// MetaKeys are the _meta keys whose names a call's request reuses,
	// without an allocation (the endpoint's own keys).
	MetaKeys []string
	// Logger logs what the SDK would log: a result that does not encode.
	Logger *slog.Logger
}

// Server is the fast path of one endpoint. It is safe for concurrent
// use.
type Server struct {
	cfg   Config
	chain sdk.MethodHandler // Config.Middleware over tool
	// clientMeta keeps the SDK's verdicts on 2026-07-28 clients' _meta
	// (meta.go).
	clientMeta clientMetaCache
	served     atomic.Int64
}

// New returns the fast path of cfg; every field of cfg is required.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg}
	s.chain = cfg.Middleware(s.tool)
	return s
}

// Served is how many requests the fast path answered.
func (s *Server) Served() int64 { return s.served.Load() }

// Serve answers r, whose body (valid JSON, within the endpoint's size
// limit) the caller read as body, and reports true, if the fast path
// takes it (doc.go); else it reports false and writes nothing, and the
// request is the SDK's to serve. rpcID is the raw JSON-RPC id of the
// call, which RPCID tells the handlers the call runs through.
func (s *Server) Serve(w http.ResponseWriter, r *http.Request, body []byte, rpcID json.RawMessage) bool {
	if !eligible(r, s.cfg.CheckHost) {
		return false
	}
	newProtocol := mcpversion.For(r.Header.Get("Mcp-Protocol-Version")).Stateless
	call, ok := parseFastCall(body, newProtocol, s.cfg.MetaKeys)
	if !ok || (newProtocol && !s.newProtocolEligible(r, call)) {
		return false
	}
	s.serve(w, r, call, rpcID)
	return true
}

// request is the request of one call on the fast path, the SDK's request
// and its parts in one allocation, and what tool tells of it. The call's
// context holds it (RPCID).
type request struct {
	req    sdk.CallToolRequest
	params sdk.CallToolParamsRaw
	extra  sdk.RequestExtra
	rpcID  json.RawMessage
	// ran says the tool handler answered with a result (the SDK's callTool
	// marks such a result complete at 2026-07-28).
	ran bool
}

// requestKey holds a call's request in its context.
type requestKey struct{}

// RPCID is the raw JSON-RPC id of the call on the fast path that ctx is
// of, nil when ctx is of no such call.
func RPCID(ctx context.Context) json.RawMessage {
	if fr, ok := ctx.Value(requestKey{}).(*request); ok {
		return fr.rpcID
	}
	return nil
}

// tool is the method handler at the end of the chain: Config.Tool, which
// also notes in the call's request whether the tool handler answered.
func (s *Server) tool(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
	res, err := s.cfg.Tool(ctx, method, req)
	if fr, ok := ctx.Value(requestKey{}).(*request); ok {
		fr.ran = err == nil && res != nil
	}
	return res, err
}

// serve answers call, a tools/call read from r's body by parseFastCall
// whose raw JSON-RPC id is rpcID, as the SDK would.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, call fastCall, rpcID json.RawMessage) {
	s.served.Add(1)
	ctx := r.Context()
	fr := &request{
		params: sdk.CallToolParamsRaw{Name: call.name, Arguments: call.args, Meta: call.meta},
		extra:  sdk.RequestExtra{TokenInfo: auth.TokenInfoFromContext(ctx), Header: r.Header},
		rpcID:  rpcID,
	}
	fr.req.Params, fr.req.Extra = &fr.params, &fr.extra
	res, err := s.chain(context.WithValue(ctx, requestKey{}, fr), methodCallTool, &fr.req)
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
			info = s.cfg.ServerInfo
		}
		var ok bool
		if data, ok = appendAnswer((*bufp)[:0], call.id, cr, info, call.newProtocol && ran); ok {
			*bufp = data
		} else {
			data = nil
		}
	}
	if data == nil {
		data, status = s.encodeAnswer(call, res, err, ran)
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
func (s *Server) encodeAnswer(call fastCall, res sdk.Result, err error, ran bool) (data []byte, status int) {
	resp := &jsonrpc.Response{ID: call.id, Error: err}
	if err == nil {
		var raw json.RawMessage
		var mErr error
		if call.newProtocol {
			raw, mErr = newProtocolResult(res, s.cfg.ServerInfo, ran)
		} else {
			raw, mErr = jsonscan.MarshalNoHTML(res)
		}
		if mErr != nil {
			// The SDK logs this and answers nothing; a result Carmy
			// builds always encodes.
			s.cfg.Logger.Error("mcp: a tools/call result does not encode", "err", mErr)
			resp.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
		} else {
			resp.Result = raw
		}
	}
	data, err = jsonrpc.EncodeMessage(resp)
	if err != nil {
		s.cfg.Logger.Error("mcp: a tools/call answer does not encode", "err", err)
		data = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}`)
	}
	if call.newProtocol {
		status = errorStatus(resp.Error)
	}
	return data, status
}
