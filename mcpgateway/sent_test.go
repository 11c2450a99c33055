package mcpgateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/mcpgateway"
	"github.com/carmyhq/carmy/store"
)

// TestUpstreamCallMarksSent: a call of an upstream MCP server's tool tells
// Request.OnSent once its request is written — over HTTP and to a stdio
// child — while the upstream tool still runs, not when it returns.
func TestUpstreamCallMarksSent(t *testing.T) {
	t.Parallel()
	// The upstream's blocked handlers are released when the test body
	// ends, before any cleanup: closing the upstream's session (the
	// gateway's cleanup) and srv.Close both wait for them, and the
	// gateway's cancellation may reach the upstream before the request it
	// cancels, which then runs on.
	release := make(chan struct{})
	defer close(release)
	up := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "v1"}, nil)
	up.AddTool(&mcp.Tool{Name: "block", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{StructuredContent: map[string]any{}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(srv.Close) // after the upstream's session closes (cleanups run last first)

	rt := newRuntime(t)
	startUpstream(t, rt, mcpgateway.Config{Name: "web", URL: srv.URL})
	startUpstream(t, rt, mcpgateway.Config{Name: "local", Command: []string{stdioServer(t)}})
	for _, tool := range []string{"web.block", "local.block"} {
		waitTool(t, rt, tool)
		var sent atomic.Int64
		first, reserved := make(chan struct{}), make(chan store.Record, 1)
		req := engine.Request{Tool: tool, RequestID: "sent-" + tool, Timeout: time.Minute,
			OnReserved: func(rec store.Record) { reserved <- rec },
			OnSent: func() {
				if sent.Add(1) == 1 {
					close(first)
				}
			}}
		done := make(chan error, 1)
		go func() {
			_, err := rt.Call(context.Background(), alice, req)
			done <- err
		}()
		rec := <-reserved
		select {
		case <-first:
		case err := <-done:
			t.Fatalf("%s: the call ended (%v) before its request was marked sent", tool, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the request was not marked sent while the upstream tool ran", tool)
		}
		rt.CancelRun(rec.ExecutionID)
		<-done
		if n := sent.Load(); n != 1 {
			t.Errorf("%s: OnSent called %d times, want once", tool, n)
		}
	}
}
