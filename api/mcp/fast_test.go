package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/store"
)

// detRuntime answers every call from the request alone, so that two
// handlers over it answer the same request alike. The tool decides the
// outcome: echo completes with what the call read (its arguments,
// session, metadata, timeout, request_id), scalar completes with a
// string, fail fails, conflict, uncertain, forbidden, busy and invalid
// are refusals, ghost is unknown to the runtime (but listed), broken is
// an internal error and slow a context error. A request_id beginning with
// "replay" is a replay. headed echoes too; its schema binds an argument
// to a header (x-mcp-header, checked from 2026-07-28 on).
type detRuntime struct{}

func (detRuntime) Tools() []engine.ToolInfo {
	var out []engine.ToolInfo
	for _, name := range []string{"echo", "scalar", "fail", "conflict", "uncertain", "busy", "invalid", "ghost", "broken", "slow"} {
		out = append(out, engine.ToolInfo{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	out = append(out, engine.ToolInfo{Name: "html", InputSchema: json.RawMessage(`{"type":"object","description":"<b>&</b>"}`)})
	return append(out, engine.ToolInfo{Name: "headed",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)})
}

// ToolsFor is the tools caller may call, as engine.Runtime's decides.
func (d detRuntime) ToolsFor(caller engine.Caller) []engine.ToolInfo {
	var out []engine.ToolInfo
	for _, t := range d.Tools() {
		if caller.MayCall(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

func (detRuntime) ToolsGeneration() uint64 { return 1 }

// detTools are the names of detRuntime's tools.
var detTools = func() map[string]bool {
	names := map[string]bool{}
	for _, t := range (detRuntime{}).Tools() {
		names[t.Name] = true
	}
	names["unlisted"] = true // runs, though Tools does not list it
	return names
}()

func (d detRuntime) Call(_ context.Context, caller engine.Caller, req engine.Request) (engine.Response, error) {
	// The runtime decides the allow-list and the tool, as
	// engine.Runtime.Call does.
	if !caller.MayCall(req.Tool) {
		return engine.Response{}, &engine.ForbiddenError{Principal: caller.Principal, Tool: req.Tool}
	}
	if !detTools[req.Tool] {
		return engine.Response{}, fmt.Errorf("%w: %q", engine.ErrUnknownTool, req.Tool)
	}
	rec := store.Record{
		ExecutionID: "ex-" + req.Tool + "-" + req.RequestID,
		Key:         store.Key{Principal: caller.Principal, Session: req.SessionID, RequestID: req.RequestID},
		Tool:        req.Tool,
		Status:      store.StatusCompleted,
	}
	switch req.Tool {
	case "echo", "headed":
		data, err := json.Marshal(map[string]any{
			"arguments": req.Arguments, "session": req.SessionID, "metadata": req.Metadata,
			"timeout": req.Timeout.String(), "request_id": req.RequestID, "principal": caller.Principal,
		})
		if err != nil {
			return engine.Response{}, err
		}
		rec.Data = data
	case "scalar":
		rec.Data = json.RawMessage(`"a string"`)
	case "html":
		rec.Data = json.RawMessage(`{"x":"<b>&amp;</b> \u2028"}`)
	case "fail":
		rec.Status, rec.Error = store.StatusFailed, json.RawMessage(`{"code":"TOOL_ERROR","message":"no stock"}`)
	case "conflict":
		return engine.Response{}, &store.ConflictError{Record: rec}
	case "uncertain":
		rec.Status = store.StatusRunning
		return engine.Response{}, &store.UncertainError{Record: rec}
	case "busy":
		return engine.Response{}, store.NewError(store.CodeUnavailable, "no leader")
	case "invalid":
		return engine.Response{}, &store.FieldError{Field: "arguments", Err: errors.New("bad")}
	case "ghost":
		return engine.Response{}, store.NewError(store.CodeUnknownTool, "unknown tool")
	case "broken":
		return engine.Response{}, errors.New("disk on fire")
	case "slow":
		return engine.Response{}, context.DeadlineExceeded
	}
	return engine.Response{Record: rec, Replayed: strings.HasPrefix(req.RequestID, "replay")}, nil
}

// observed collects what Observe is told, Took zeroed.
type observedCalls struct {
	mu    sync.Mutex
	calls []CallInfo
}

func (o *observedCalls) observe(_ context.Context, c CallInfo) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c.Took, c.caller = 0, nil
	o.calls = append(o.calls, c)
}

func (o *observedCalls) take() []CallInfo {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.calls
	o.calls = nil
	return out
}

// pathPair is the same endpoint twice: with the fast path, and with every
// request through the SDK.
type pathPair struct {
	fast, sdk       *Handler
	fastObs, sdkObs *observedCalls
	withAuth        bool
}

func newPathPair(t testing.TB, withAuth bool) *pathPair {
	t.Helper()
	p := &pathPair{fastObs: &observedCalls{}, sdkObs: &observedCalls{}, withAuth: withAuth}
	mk := func(obs *observedCalls) *Handler {
		cfg := Config{
			Runtime:   detRuntime{},
			BodyLimit: 4096,
			Logger:    slog.New(slog.DiscardHandler),
			Observe:   obs.observe,
			Admit: func(c *engine.Caller) error {
				if c.Principal == "throttled" {
					return store.NewError(store.CodeRateLimited, "over the rate")
				}
				return nil
			},
		}
		if withAuth {
			cfg.Verify = func(_ *http.Request, token string) (*engine.Caller, error) {
				switch token {
				case "tok-all":
					return &engine.Caller{Principal: "all"}, nil
				case "tok-some":
					return &engine.Caller{Principal: "some", Tools: engine.NewToolSet("echo", "nosuch")}, nil
				case "tok-throttled":
					return &engine.Caller{Principal: "throttled"}, nil
				}
				return nil, ErrInvalidToken
			}
		} else {
			cfg.Anonymous = &engine.Caller{Principal: "anonymous"}
		}
		h, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	p.fast, p.sdk = mk(p.fastObs), mk(p.sdkObs)
	p.sdk.noFastPath = true
	return p
}

// fastCase is one request: its body and how its headers differ from a
// well-formed tools/call's.
type fastCase struct {
	name   string
	body   string
	header map[string]string // "" removes a header
	method string
	host   string
	// fast says the fast path serves it (else the SDK does).
	fast bool
}

// served is what a client sees of an answer.
type served struct {
	status int
	header http.Header
	body   string
}

func (p *pathPair) serve(h *Handler, c fastCase) served {
	method := c.method
	if method == "" {
		method = http.MethodPost
	}
	r := httptest.NewRequest(method, Path, strings.NewReader(c.body))
	r.Host = "127.0.0.1:8080"
	if c.host != "" {
		r.Host = c.host
	}
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if p.withAuth {
		r.Header.Set("Authorization", "Bearer tok-all")
	}
	for k, v := range c.header {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	res := w.Result()
	body, _ := io.ReadAll(res.Body)
	return served{status: res.StatusCode, header: res.Header, body: string(body)}
}

// compare sends c through both paths and reports any difference in the
// answer or in what Observe was told; it returns whether the fast path
// served it.
func (p *pathPair) compare(t *testing.T, c fastCase) bool {
	t.Helper()
	before := p.fast.fast.Served()
	got, want := p.serve(p.fast, c), p.serve(p.sdk, c)
	tookFast := p.fast.fast.Served() != before
	if got.status != want.status || got.body != want.body {
		t.Errorf("%s: fast path answered\n  %d %s\nthe SDK\n  %d %s", c.name, got.status, got.body, want.status, want.body)
	}
	for _, k := range []string{"Content-Type", "Cache-Control", "Www-Authenticate", "Allow", McpSessionHeader} {
		g, w := got.header.Values(k), want.header.Values(k)
		if k == McpSessionHeader && len(g) == 1 && len(w) == 1 && g[0] != "" && w[0] != "" {
			g, w = nil, nil // fresh on each path (an initialize's: sender.go)
		}
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s: header %s: fast path %q, SDK %q", c.name, k, g, w)
		}
	}
	if g, w := p.fastObs.take(), p.sdkObs.take(); fmt.Sprintf("%+v", g) != fmt.Sprintf("%+v", w) {
		t.Errorf("%s: Observe told\n  %+v\nover the SDK\n  %+v", c.name, g, w)
	}
	return tookFast
}

func callBody(id, params string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":` + params + `}`
}

// fastCases are requests the fast path serves and requests it must leave
// to the SDK, each beside its neighbour of the other kind.
func fastCases() []fastCase {
	ok := func(name, body string) fastCase { return fastCase{name: name, body: body, fast: true} }
	sdkOnly := func(name, body string) fastCase { return fastCase{name: name, body: body} }
	withHeader := func(c fastCase, kv ...string) fastCase {
		c.header = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			c.header[kv[i]] = kv[i+1]
		}
		return c
	}
	echo := `{"name":"echo","arguments":{"sku":"KB-01","n":2},"_meta":{"carmy/request_id":"r-1"}}`
	cases := []fastCase{
		ok("integer id", callBody("1", echo)),
		ok("zero id", callBody("0", echo)),
		ok("negative id", callBody("-42", echo)),
		ok("minus zero id", callBody("-0", echo)),
		ok("15-digit id", callBody("999999999999999", echo)),
		ok("string id", callBody(`"abc"`, echo)),
		ok("empty string id", callBody(`""`, echo)),
		ok("escaped string id", callBody(`"a\"b\\c\u00e9\n<&>"`, echo)),
		ok("unicode id", callBody(`"日本"`, echo)),
		ok("members in another order", `{"params":`+echo+`,"method":"tools/call","id":7,"jsonrpc":"2.0"}`),
		ok("whitespace", " \n{ \"jsonrpc\" : \"2.0\" ,\t\"id\" : 3 , \"method\":\"tools/call\",\"params\":{ \"name\" : \"echo\" , \"arguments\" : { \"a\" : [ 1 , 2 ] } } }\n "),
		ok("no _meta", callBody("1", `{"name":"echo","arguments":{"a":1}}`)),
		ok("no arguments", callBody("1", `{"name":"echo","_meta":{"carmy/request_id":"r-2"}}`)),
		ok("null arguments", callBody("1", `{"name":"echo","arguments":null}`)),
		ok("array arguments", callBody("1", `{"name":"echo","arguments":[1,2]}`)),
		ok("string arguments", callBody("1", `{"name":"echo","arguments":"x"}`)),
		ok("arguments with escapes and html", callBody("1", `{"name":"echo","arguments":{"s":"<a href=\"x\">&</a>\u00e9\t\u2028","f":1.5,"neg":-0.25,"t":true,"n":null}}`)),
		ok("empty _meta", callBody("1", `{"name":"echo","_meta":{}}`)),
		ok("session, metadata, timeout", callBody("1", `{"name":"echo","arguments":{},"_meta":{"carmy/request_id":"r-3","carmy/session_id":"s-1","carmy/metadata":{"b":[1,{"c":null}],"a":"x"},"carmy/timeout_ms":2500}}`)),
		ok("huge timeout", callBody("1", `{"name":"echo","_meta":{"carmy/timeout_ms":999999999999999}}`)),
		ok("fractional timeout", callBody("1", `{"name":"echo","_meta":{"carmy/timeout_ms":2.5}}`)),
		ok("zero timeout", callBody("1", `{"name":"echo","_meta":{"carmy/timeout_ms":0}}`)),
		ok("string timeout", callBody("1", `{"name":"echo","_meta":{"carmy/timeout_ms":"5"}}`)),
		ok("null carmy keys", callBody("1", `{"name":"echo","_meta":{"carmy/request_id":null,"carmy/session_id":null,"carmy/metadata":null,"carmy/timeout_ms":null}}`)),
		ok("numeric request_id", callBody("1", `{"name":"echo","_meta":{"carmy/request_id":5}}`)),
		ok("empty request_id", callBody("1", `{"name":"echo","_meta":{"carmy/request_id":""}}`)),
		ok("array metadata", callBody("1", `{"name":"echo","_meta":{"carmy/metadata":[1]}}`)),
		ok("numeric session", callBody("1", `{"name":"echo","_meta":{"carmy/session_id":1}}`)),
		ok("protocol's own _meta keys", callBody("1", `{"name":"echo","_meta":{"io.example/trace":"p","other":{"x":[]}}}`)),
		withHeader(ok("session header", callBody("1", `{"name":"echo","_meta":{"carmy/request_id":"r-4"}}`)), "Carmy-Session-Id", "from-header"),
		withHeader(ok("session header and _meta", callBody("1", `{"name":"echo","_meta":{"carmy/session_id":"m"}}`)), "Carmy-Session-Id", "from-header"),
		ok("replay", callBody("1", `{"name":"echo","_meta":{"carmy/request_id":"replay-1"}}`)),
		ok("scalar data", callBody("1", `{"name":"scalar"}`)),
		ok("html data", callBody("1", `{"name":"html"}`)),
		ok("failed", callBody("1", `{"name":"fail","_meta":{"carmy/request_id":"r-5"}}`)),
		ok("conflict", callBody("1", `{"name":"conflict","_meta":{"carmy/request_id":"r-6"}}`)),
		ok("uncertain", callBody("1", `{"name":"uncertain","_meta":{"carmy/request_id":"r-7"}}`)),
		ok("unavailable", callBody("1", `{"name":"busy"}`)),
		ok("invalid", callBody("1", `{"name":"invalid"}`)),
		ok("unknown to the runtime", callBody("1", `{"name":"ghost"}`)),
		ok("internal error", callBody("1", `{"name":"broken"}`)),
		ok("context error", callBody("1", `{"name":"slow"}`)),
		ok("unknown tool", callBody("1", `{"name":"nosuch","arguments":{}}`)),
		ok("empty tool name", callBody("1", `{"name":""}`)),
		ok("odd tool name", callBody("1", `{"name":"a\"b<c>"}`)),

		// Left to the SDK.
		sdkOnly("id null", callBody("null", echo)),
		sdkOnly("no id (a notification)", `{"jsonrpc":"2.0","method":"tools/call","params":`+echo+`}`),
		sdkOnly("fractional id", callBody("1.5", echo)),
		sdkOnly("exponent id", callBody("1e3", echo)),
		sdkOnly("16-digit id", callBody("1234567890123456", echo)),
		sdkOnly("object id", callBody(`{}`, echo)),
		sdkOnly("bool id", callBody(`true`, echo)),
		sdkOnly("version 1.0", `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":`+echo+`}`),
		sdkOnly("no version", `{"id":1,"method":"tools/call","params":`+echo+`}`),
		sdkOnly("tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`),
		sdkOnly("ping", `{"jsonrpc":"2.0","id":1,"method":"ping"}`),
		sdkOnly("initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`),
		sdkOnly("notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`),
		sdkOnly("cancelled", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`),
		sdkOnly("unknown method", `{"jsonrpc":"2.0","id":1,"method":"nope"}`),
		sdkOnly("escaped method", `{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":`+echo+`}`),
		sdkOnly("batch", `[`+callBody("1", echo)+`]`),
		sdkOnly("empty batch", `[]`),
		sdkOnly("no params", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`),
		sdkOnly("null params", callBody("1", `null`)),
		sdkOnly("array params", callBody("1", `[]`)),
		sdkOnly("no name", callBody("1", `{"arguments":{}}`)),
		sdkOnly("numeric name", callBody("1", `{"name":5}`)),
		sdkOnly("unknown params member", callBody("1", `{"name":"echo","extra":1}`)),
		sdkOnly("requestState", callBody("1", `{"name":"echo","requestState":"x"}`)),
		sdkOnly("unknown top-level member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+echo+`,"x":1}`),
		sdkOnly("result member", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+echo+`,"result":{}}`),
		sdkOnly("duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":`+echo+`}`),
		sdkOnly("duplicate name", callBody("1", `{"name":"echo","name":"fail"}`)),
		sdkOnly("duplicate _meta key", callBody("1", `{"name":"echo","_meta":{"carmy/request_id":"a","carmy/request_id":"b"}}`)),
		sdkOnly("upper-case member", `{"jsonrpc":"2.0","ID":1,"method":"tools/call","params":`+echo+`}`),
		sdkOnly("null _meta", callBody("1", `{"name":"echo","_meta":null}`)),
		sdkOnly("array _meta", callBody("1", `{"name":"echo","_meta":[]}`)),
		sdkOnly("protocolVersion in _meta", callBody("1", `{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`)),
		sdkOnly("exponent in arguments", callBody("1", `{"name":"echo","arguments":{"x":1e400}}`)),
		sdkOnly("exponent timeout", callBody("1", `{"name":"echo","_meta":{"carmy/timeout_ms":1e3}}`)),
		sdkOnly("long number", callBody("1", `{"name":"echo","arguments":{"x":12345678901234567890}}`)),
		sdkOnly("lone surrogate", callBody("1", `{"name":"echo","arguments":{"x":"\ud800"}}`)),
		sdkOnly("surrogate pair", callBody("1", `{"name":"echo","arguments":{"x":"\uD83D\uDE00"}}`)),
		sdkOnly("invalid UTF-8", callBody("1", "{\"name\":\"echo\",\"arguments\":{\"x\":\"\xff\"}}")),
		sdkOnly("deep nesting", callBody("1", `{"name":"echo","arguments":`+strings.Repeat(`[`, 70)+strings.Repeat(`]`, 70)+`}`)),
		sdkOnly("trailing garbage", callBody("1", echo)+`x`),
		sdkOnly("two messages", callBody("1", echo)+callBody("2", echo)),
		sdkOnly("not JSON", `{"jsonrpc":`),
		sdkOnly("empty body", ``),
		sdkOnly("over the limit", callBody("1", `{"name":"echo","arguments":{"x":"`+strings.Repeat("a", 5000)+`"}}`)),
		withHeader(sdkOnly("version 2025-03-26", callBody("1", echo)), "Mcp-Protocol-Version", "2025-03-26"),
		withHeader(sdkOnly("version 2026-07-28", callBody("1", echo)), "Mcp-Protocol-Version", "2026-07-28"),
		withHeader(sdkOnly("unsupported version", callBody("1", echo)), "Mcp-Protocol-Version", "1999-01-01"),
		withHeader(sdkOnly("no version header", callBody("1", echo)), "Mcp-Protocol-Version", ""),
		withHeader(sdkOnly("text content type", callBody("1", echo)), "Content-Type", "text/plain"),
		withHeader(sdkOnly("no content type", callBody("1", echo)), "Content-Type", ""),
		withHeader(sdkOnly("JSON accept only", callBody("1", echo)), "Accept", "application/json"),
		withHeader(sdkOnly("no accept", callBody("1", echo)), "Accept", ""),
		withHeader(sdkOnly("Last-Event-ID", callBody("1", echo)), "Last-Event-ID", "x_1"),
		{name: "GET", method: http.MethodGet},
		{name: "DELETE", method: http.MethodDelete, body: callBody("1", echo)},
	}
	// Header forms the SDK accepts too.
	cases = append(cases,
		withHeader(ok("content type with charset", callBody("1", echo)), "Content-Type", "application/json; charset=utf-8"),
		withHeader(ok("wildcard accept", callBody("1", echo)), "Accept", "*/*"),
		withHeader(ok("accept with parameters", callBody("1", echo)), "Accept", "text/event-stream;q=0.5, Application/JSON"),
		withHeader(ok("version 2025-06-18", callBody("1", echo)), "Mcp-Protocol-Version", "2025-06-18"),
		// A stateless server ignores a session id, as the SDK does.
		withHeader(ok("Mcp-Session-Id", callBody("1", echo)), "Mcp-Session-Id", "some-session"),
		// Mcp-Method and Mcp-Name are read from 2026-07-28 on only.
		withHeader(ok("Mcp-Method of another method", callBody("1", echo)), "Mcp-Method", "tools/list", "Mcp-Name", "other"),
	)
	return cases
}

// TestFastPathMatchesSDK sends each request of fastCases through the fast
// path and through the SDK alone: the answers (status, headers, bytes)
// and what Observe is told are the same, and the fast path serves exactly
// the requests it should.
func TestFastPathMatchesSDK(t *testing.T) {
	for _, withAuth := range []bool{false, true} {
		t.Run(fmt.Sprintf("auth=%v", withAuth), func(t *testing.T) {
			p := newPathPair(t, withAuth)
			cases := fastCases()
			if withAuth {
				echo := callBody("1", `{"name":"echo","_meta":{"carmy/request_id":"r-1"}}`)
				cases = append(cases,
					fastCase{name: "allow-listed tool", body: echo, header: map[string]string{"Authorization": "Bearer tok-some"}, fast: true},
					fastCase{name: "tool outside the allow-list", body: callBody("1", `{"name":"fail"}`), header: map[string]string{"Authorization": "Bearer tok-some"}, fast: true},
					fastCase{name: "unknown tool in the allow-list", body: callBody("1", `{"name":"nosuch"}`), header: map[string]string{"Authorization": "Bearer tok-some"}, fast: true},
					fastCase{name: "unknown tool outside the allow-list", body: callBody("1", `{"name":"other"}`), header: map[string]string{"Authorization": "Bearer tok-some"}, fast: true},
					fastCase{name: "rate limited", body: echo, header: map[string]string{"Authorization": "Bearer tok-throttled"}, fast: true},
					fastCase{name: "unknown token", body: echo, header: map[string]string{"Authorization": "Bearer nope"}},
					fastCase{name: "no token", body: echo, header: map[string]string{"Authorization": ""}},
					// With auth on, the Host is not checked.
					fastCase{name: "foreign host", body: echo, host: "evil.example", fast: true},
				)
			} else {
				cases = append(cases,
					fastCase{name: "foreign host", body: callBody("1", `{"name":"echo"}`), host: "evil.example"},
					fastCase{name: "localhost host", body: callBody("1", `{"name":"echo"}`), host: "localhost:8080", fast: true},
					fastCase{name: "IPv6 loopback host", body: callBody("1", `{"name":"echo"}`), host: "[::1]:8080", fast: true},
				)
			}
			for _, c := range cases {
				if tookFast := p.compare(t, c); tookFast != c.fast {
					t.Errorf("%s: served by the fast path: %v, want %v", c.name, tookFast, c.fast)
				}
			}
		})
	}
}

// TestFastPathReadsBodyOnce checks that a request the fast path leaves to
// the SDK reaches it whole, from a body that arrives in pieces, and that
// a body whose reading fails is refused as the SDK refuses it.
func TestFastPathReadsBodyOnce(t *testing.T) {
	p := newPathPair(t, false)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, h := range []*Handler{p.fast, p.sdk} {
		r := httptest.NewRequest(http.MethodPost, Path, io.NopCloser(iotestOneByte(body)))
		r.Host = "127.0.0.1"
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"name":"echo"`) {
			t.Errorf("tools/list in pieces: %d %s", w.Code, w.Body.String())
		}
	}
	var answers []string
	for _, h := range []*Handler{p.fast, p.sdk} {
		r := httptest.NewRequest(http.MethodPost, Path, io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0",`), errReader{errors.New("connection reset")}))
		r.Host = "127.0.0.1"
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		answers = append(answers, fmt.Sprint(w.Code, " ", w.Body.String()))
	}
	if answers[0] != answers[1] {
		t.Errorf("a body that fails: fast path %s, SDK %s", answers[0], answers[1])
	}
}

// iotestOneByte reads s one byte at a time.
func iotestOneByte(s string) io.Reader { return &oneByte{s: s} }

type oneByte struct{ s string }

func (o *oneByte) Read(p []byte) (int, error) {
	if o.s == "" {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = o.s[0]
	o.s = o.s[1:]
	return 1, nil
}

// FuzzFastPathMatchesSDK sends arbitrary bodies (and protocol versions)
// through both paths: the answers and what Observe is told are the same.
func FuzzFastPathMatchesSDK(f *testing.F) {
	for _, c := range fastCases() {
		f.Add(c.body, "2025-11-25")
	}
	f.Add(callBody("1", `{"name":"echo"}`), "2025-06-18")
	for _, c := range newProtocolCases() {
		f.Add(c.body, mcpversion.V20260728)
	}
	p := newPathPair(f, false)
	f.Fuzz(func(t *testing.T, body, version string) {
		if !utf8OK(version) {
			return
		}
		// The headers of a call of echo, which the SDK reads from
		// 2026-07-28 on.
		p.compare(t, fastCase{name: fmt.Sprintf("%q (version %q)", body, version), body: body,
			header: map[string]string{"Mcp-Protocol-Version": version, "Mcp-Method": methodCallTool, "Mcp-Name": "echo"}})
	})
}

// utf8OK keeps header values an HTTP request can carry.
func utf8OK(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return strings.TrimSpace(s) == s
}

// TestFastPathUnderRace runs calls on both paths at once, for the race
// detector.
func TestFastPathUnderRace(t *testing.T) {
	p := newPathPair(t, true)
	var wg sync.WaitGroup
	deadline := time.Now().Add(10 * time.Second)
	for i := range 8 {
		wg.Go(func() {
			for j := 0; j < 50 && time.Now().Before(deadline); j++ {
				h := p.fast
				if (i+j)%2 == 0 {
					h = p.sdk
				}
				got := p.serve(h, fastCase{body: callBody(fmt.Sprint(j), `{"name":"echo","_meta":{"carmy/request_id":"r"}}`)})
				if got.status != http.StatusOK || !bytes.Contains([]byte(got.body), []byte(`"carmy/replayed":false`)) {
					t.Errorf("call: %d %s", got.status, got.body)
					return
				}
			}
		})
	}
	wg.Wait()
	p.fastObs.take()
	p.sdkObs.take()
}
