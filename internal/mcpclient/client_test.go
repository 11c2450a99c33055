package mcpclient_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/internal/mcpclient"
	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/tests/testutil"
)

// toolResult is what the tests read of a tools/call's answer.
type toolResult struct {
	Result *struct {
		Meta struct {
			RequestID string `json:"carmy/request_id"`
			Replayed  *bool  `json:"carmy/replayed"`
		} `json:"_meta"`
		IsError bool `json:"isError"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestCallToolAtEveryVersion: against a node's /mcp, a tools/call sent
// at each supported version runs, and the same request_id again is
// replayed; tools/list answers the tools.
func TestCallToolAtEveryVersion(t *testing.T) {
	app := carmy.App(carmy.WithLogger(slog.New(slog.DiscardHandler)), carmy.WithDrainTimeout(time.Second))
	if err := app.AddDemoTools(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + testutil.Serve(t, app, api.Config{Logger: slog.New(slog.DiscardHandler)})
	for _, version := range mcpversion.Supported() {
		c := &mcpclient.Client{URL: base + "/mcp", Version: version, Name: "mcpclient-test"}
		for i, wantReplayed := range []bool{false, true} {
			a, err := c.CallTool(t.Context(), "echo", map[string]any{"v": 1}, map[string]any{"carmy/request_id": "r-" + version})
			if err != nil {
				t.Fatal(err)
			}
			var res toolResult
			if err := a.Decode(&res); err != nil || a.Status != http.StatusOK || res.Result == nil || res.Result.IsError {
				t.Fatalf("%s: call %d: %d %s (%v)", version, i, a.Status, a.Body, err)
			}
			if m := res.Result.Meta; m.RequestID != "r-"+version || m.Replayed == nil || *m.Replayed != wantReplayed {
				t.Errorf("%s: call %d: _meta %+v, want replayed %v", version, i, m, wantReplayed)
			}
		}
		a, err := c.Send(t.Context(), "tools/list", nil)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Result struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			} `json:"result"`
		}
		if err := a.Decode(&list); err != nil || len(list.Result.Tools) == 0 {
			t.Errorf("%s: tools/list: %d %s (%v)", version, a.Status, a.Body, err)
		}
	}
}

// TestStatelessRequest: at a stateless version a request carries the
// Mcp-Method and Mcp-Name headers and the protocol's own _meta members
// besides the caller's; before, neither; and an event stream's answer is
// its last message.
func TestStatelessRequest(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		version   string
		stateless bool
	}{{mcpversion.V20251125, false}, {mcpversion.V20260728, true}} {
		c := &mcpclient.Client{URL: srv.URL, Version: tc.version, Token: "tok"}
		a, err := c.CallTool(t.Context(), "echo", nil, map[string]any{"carmy/request_id": "r1"})
		if err != nil {
			t.Fatal(err)
		}
		if string(a.Body) != `{"jsonrpc":"2.0","id":1,"result":{}}` {
			t.Errorf("%s: the answer's message = %q, want the stream's last", tc.version, a.Body)
		}
		h := got.Header
		if h.Get("Mcp-Protocol-Version") != tc.version || h.Get("Authorization") != "Bearer tok" {
			t.Errorf("%s: headers %v", tc.version, h)
		}
		if stateless := h.Get("Mcp-Method") == "tools/call" && h.Get("Mcp-Name") == "echo"; stateless != tc.stateless {
			t.Errorf("%s: Mcp-Method %q, Mcp-Name %q", tc.version, h.Get("Mcp-Method"), h.Get("Mcp-Name"))
		}
		hasMeta := containsAll(string(body), `"carmy/request_id":"r1"`, `"io.modelcontextprotocol/protocolVersion":"`+tc.version+`"`, `"io.modelcontextprotocol/clientCapabilities":{}`)
		if hasMeta != tc.stateless || !containsAll(string(body), `"carmy/request_id":"r1"`) {
			t.Errorf("%s: body %s", tc.version, body)
		}
	}
	if got, want := string(mcpclient.AppendProtocolMeta(nil, mcpversion.V20260728, "b")),
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"b","version":"1"},"io.modelcontextprotocol/clientCapabilities":{},`; got != want {
		t.Errorf("AppendProtocolMeta = %s, want %s", got, want)
	}
	if got := mcpclient.AppendProtocolMeta(nil, mcpversion.V20251125, "b"); len(got) != 0 {
		t.Errorf("AppendProtocolMeta before a stateless version = %s", got)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
