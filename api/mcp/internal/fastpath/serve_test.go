package fastpath

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// seen is what the middleware of testServer saw of a call.
type seen struct {
	method string
	name   string
	args   string
	meta   sdk.Meta
	rpcID  string
}

// testServer is a fast path over a middleware that records each call
// and a tool that answers it with text "ok".
func testServer(calls *[]seen) *Server {
	return New(Config{
		Middleware: func(next sdk.MethodHandler) sdk.MethodHandler {
			return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
				p := req.(*sdk.CallToolRequest).Params
				*calls = append(*calls, seen{method, p.Name, string(p.Arguments), p.Meta, string(RPCID(ctx))})
				return next(ctx, method, req)
			}
		},
		Tool: func(context.Context, string, sdk.Request) (sdk.Result, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
		},
		ServerInfo: json.RawMessage(`{"name":"t"}`),
		Callable:   func(string) bool { return true },
		MetaKeys:   []string{"carmy/request_id"},
		Logger:     slog.New(slog.DiscardHandler),
	})
}

// post is a well-formed tools/call request of body at 2025-11-25.
func post(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	return r
}

const plainCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"a":1},"_meta":{"carmy/request_id":"r-1"}}}`

// TestServeRunsThroughMiddleware checks that a call the fast path takes
// runs through Config.Middleware over Config.Tool with the SDK's
// request, its raw id told by RPCID, and is answered in the SDK's bytes.
func TestServeRunsThroughMiddleware(t *testing.T) {
	var calls []seen
	s := testServer(&calls)
	w := httptest.NewRecorder()
	if !s.Serve(w, post(plainCall), []byte(plainCall), json.RawMessage("7")) {
		t.Fatal("a plain tools/call left to the SDK")
	}
	want := seen{"tools/call", "echo", `{"a":1}`, sdk.Meta{"carmy/request_id": "r-1"}, "7"}
	if len(calls) != 1 || calls[0].method != want.method || calls[0].name != want.name || calls[0].args != want.args ||
		len(calls[0].meta) != 1 || calls[0].meta["carmy/request_id"] != "r-1" || calls[0].rpcID != want.rpcID {
		t.Fatalf("the middleware saw %+v, want %+v", calls, want)
	}
	if got := w.Body.String(); got != `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok"}]}}` {
		t.Errorf("answer %s", got)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if s.Served() != 1 {
		t.Errorf("Served() = %d, want 1", s.Served())
	}
}

// TestServeLeavesOthersUntouched checks that a request the fast path
// does not take is left with nothing written and nothing run.
func TestServeLeavesOthersUntouched(t *testing.T) {
	cases := map[string]*http.Request{
		"old version": func() *http.Request {
			r := post(plainCall)
			r.Header.Set("Mcp-Protocol-Version", "2025-03-26")
			return r
		}(),
		"no event stream": func() *http.Request { r := post(plainCall); r.Header.Set("Accept", "application/json"); return r }(),
		"GET":             func() *http.Request { r := post(plainCall); r.Method = http.MethodGet; return r }(),
	}
	bodies := map[string]string{
		"another method":  `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`,
		"a batch":         "[" + plainCall + "]",
		"an extra member": `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"},"x":1}`,
		"a protocol key":  `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/x":1}}}`,
		"an exponent":     `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"a":1e3}}}`,
	}
	for name, body := range bodies {
		cases[name] = post(body)
	}
	for name, r := range cases {
		var calls []seen
		s := testServer(&calls)
		body := plainCall
		if b, ok := bodies[name]; ok {
			body = b
		}
		w := httptest.NewRecorder()
		if s.Serve(w, r, []byte(body), json.RawMessage("7")) {
			t.Errorf("%s: taken", name)
			continue
		}
		if len(calls) != 0 || w.Body.Len() != 0 || len(w.Header()) != 0 || s.Served() != 0 {
			t.Errorf("%s: left to the SDK, yet ran %v, wrote %q and %v", name, calls, w.Body.String(), w.Header())
		}
	}
}
