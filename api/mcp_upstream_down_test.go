package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/mcpgateway"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// TestUpstreamDownReplaysOverHTTPAndMCP: a call of an upstream MCP
// server's tool with request_id R completes; the server then goes away.
// Once its tools are unavailable, a retry of R over POST /v1/tools/call
// and over /mcp (the go-sdk client) is still the replay of its record,
// while a call with a new request_id is 503 UNAVAILABLE (an isError
// result over MCP).
func TestUpstreamDownReplaysOverHTTPAndMCP(t *testing.T) {
	t.Parallel()
	up := sdk.NewServer(&sdk.Implementation{Name: "up", Version: "v1"}, nil)
	var n atomic.Int64
	up.AddTool(&sdk.Tool{Name: "incr", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{StructuredContent: map[string]any{"n": n.Add(1)}}, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up }, nil))
	defer srv.Close()

	app, base := startOASNode(t, api.Config{})
	u, err := mcpgateway.New(app, mcpgateway.Config{Name: "probeh", URL: srv.URL, Logger: quietLogger(), MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	wait.Until(t, 30*time.Second, "probeh.incr to be listed", func() bool { return hasTool(app.Tools(), "probeh.incr") })

	call := func(requestID string) (int, map[string]any) {
		t.Helper()
		body := `{"tool":"probeh.incr","arguments":{}`
		if requestID != "" {
			body += `,"request_id":"` + requestID + `"`
		}
		resp, err := http.Post(base+"/v1/tools/call", "application/json", strings.NewReader(body+"}"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("POST /v1/tools/call: %d %q", resp.StatusCode, raw)
		}
		return resp.StatusCode, out
	}
	status, first := call("R")
	if status != http.StatusOK || first["status"] != "completed" || first["replayed"] != false {
		t.Fatalf("the first call: %d %v", status, first)
	}

	srv.CloseClientConnections()
	srv.Close()
	// Unavailable: the refusal of a call without request_id names the
	// server's tools (not a request that could not be sent).
	wait.Until(t, 30*time.Second, "the tools of probeh to be unavailable", func() bool {
		status, out := call("")
		e, _ := out["error"].(map[string]any)
		msg, _ := e["message"].(string)
		return status == http.StatusServiceUnavailable && strings.Contains(msg, `MCP server "probeh" are unavailable`)
	})

	if status, out := call("R"); status != http.StatusOK || out["replayed"] != true || out["execution_id"] != first["execution_id"] {
		t.Errorf("a retry of R over HTTP: %d %v; want 200, the replay of %v", status, out, first["execution_id"])
	}
	if status, out := call("R-new"); status != http.StatusServiceUnavailable {
		t.Errorf("a new request_id over HTTP: %d %v; want 503", status, out)
	}

	client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "v1"}, nil)
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "probeh.incr", Arguments: map[string]any{}, Meta: sdk.Meta{"carmy/request_id": "R"}})
	if err != nil || res.IsError || res.Meta["carmy/replayed"] != true || res.Meta["carmy/execution_id"] != first["execution_id"] {
		t.Errorf("a retry of R over /mcp: %+v, %v; want the replay of %v", res, err, first["execution_id"])
	}
	res, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "probeh.incr", Arguments: map[string]any{}, Meta: sdk.Meta{"carmy/request_id": "R-new"}})
	if err != nil || !res.IsError || res.Meta["carmy/error_code"] != "UNAVAILABLE" {
		t.Errorf("a new request_id over /mcp: %+v, %v; want an UNAVAILABLE refusal", res, err)
	}
}
