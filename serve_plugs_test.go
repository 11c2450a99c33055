package carmy_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/mcp"
	"github.com/carmyhq/carmy/metrics/prom"
	"github.com/carmyhq/carmy/tests/testutil"
)

// serveBare serves app with cfg as the library does (no test defaults)
// until the test ends, and returns its base URL once /readyz answers.
func serveBare(t *testing.T, app *carmy.Runtime, cfg api.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, ln, cfg) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	base := "http://" + ln.Addr().String()
	testutil.Until(t, 10*time.Second, "the node to be ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}

// answer sends one request and returns its status and body.
func answer(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(raw)
}

// TestServePlugs checks that the library's Serve serves /metrics and /mcp
// only when given them (api.Config.Metrics, api.Config.MCP): without,
// both are 404 NOT_FOUND and calls are served; with prom.New and
// mcp.Endpoint, /metrics counts a call made over /mcp and the runtime's
// tool.
func TestServePlugs(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"carmy/request_id":"r1"}}}`
	echo := carmy.ToolSpec{Name: "echo", Func: func(_ context.Context, c carmy.Call) (any, error) { return c.Arguments, nil }}

	bare := newApp(t)
	mustAdd(t, bare, echo)
	base := serveBare(t, bare, api.Config{})
	if status, body := answer(t, http.MethodPost, base+"/v1/tools/call", `{"tool":"echo","request_id":"r1"}`); status != http.StatusOK {
		t.Errorf("a call without plugs: %d %s", status, body)
	}
	for _, r := range [][2]string{{http.MethodGet, "/metrics"}, {http.MethodPost, "/mcp"}} {
		if status, body := answer(t, r[0], base+r[1], call); status != http.StatusNotFound || !strings.Contains(body, `"NOT_FOUND"`) {
			t.Errorf("%s %s without plugs: %d %s, want 404 NOT_FOUND", r[0], r[1], status, body)
		}
	}

	plugged := newApp(t)
	mustAdd(t, plugged, echo)
	base = serveBare(t, plugged, api.Config{Metrics: prom.New(plugged.Engine()), MCP: mcp.Endpoint})
	if status, body := answer(t, http.MethodPost, base+"/mcp", call); status != http.StatusOK || !strings.Contains(body, `"result"`) {
		t.Fatalf("POST /mcp with mcp.Endpoint: %d %s", status, body)
	}
	status, text := answer(t, http.MethodGet, base+"/metrics", "")
	for _, line := range []string{
		`carmy_calls_total{outcome="ran",transport="mcp"} 1`,
		`carmy_tool_duration_seconds_count{status="completed",tool="echo"} 1`,
	} {
		if status != http.StatusOK || !strings.Contains(text, line+"\n") {
			t.Errorf("GET /metrics with prom.New: %d, lacks %q", status, line)
		}
	}
}
