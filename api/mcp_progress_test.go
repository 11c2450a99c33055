package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/mcpgateway"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// TestMCPProgressFromUpstream: an upstream MCP server's progress reaches
// a client of /mcp that asked for it (docs/mcp.md#progress), with the client's own
// token, on the call's stream; the client is the official Go SDK's.
func TestMCPProgressFromUpstream(t *testing.T) {
	// The upstream: one tool that reports three steps, then answers.
	up := sdk.NewServer(&sdk.Implementation{Name: "up", Version: "v1"}, nil)
	var seenToken any
	var mu sync.Mutex
	up.AddTool(&sdk.Tool{Name: "steps", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			token := req.Params.GetProgressToken()
			mu.Lock()
			seenToken = token
			mu.Unlock()
			for i := 1; i <= 3; i++ {
				if token != nil {
					if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
						ProgressToken: token, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i),
					}); err != nil {
						return nil, err
					}
				}
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up }, nil))
	defer srv.Close()

	app, base := startOASNode(t, api.Config{})
	u, err := mcpgateway.New(app, mcpgateway.Config{Name: "up", URL: srv.URL, Logger: quietLogger(), MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	wait.Until(t, 30*time.Second, "up.steps to be listed", func() bool { return hasTool(app.Tools(), "up.steps") })

	var (
		got []string
		gmu sync.Mutex
	)
	client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "v1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			gmu.Lock()
			defer gmu.Unlock()
			got = append(got, fmt.Sprintf("%v %v/%v %s", req.Params.ProgressToken, req.Params.Progress, req.Params.Total, req.Params.Message))
		},
	})
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &sdk.CallToolParams{Name: "up.steps", Arguments: map[string]any{}, Meta: sdk.Meta{"carmy/request_id": "p-1"}}
	params.SetProgressToken("mine-1")
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Meta["carmy/status"] != "completed" {
		t.Errorf("the call: %+v", res)
	}
	// The SDK hands notifications to their handler apart from the answer:
	// wait for the third.
	wait.Until(t, 10*time.Second, "the third progress notification", func() bool {
		gmu.Lock()
		defer gmu.Unlock()
		return len(got) >= 3
	})
	gmu.Lock()
	defer gmu.Unlock()
	want := []string{"mine-1 1/3 step 1", "mine-1 2/3 step 2", "mine-1 3/3 step 3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("progress: %q, want %q", got, want)
	}
	mu.Lock()
	if s, _ := seenToken.(string); s == "" || s == "mine-1" {
		t.Errorf("the upstream saw the token %v: want one of the gateway's own", seenToken)
	}
	mu.Unlock()

	// A replay reports nothing, and answers the same.
	got = nil
	gmu.Unlock()
	res, err = cs.CallTool(t.Context(), params)
	gmu.Lock()
	if err != nil || res.Meta["carmy/replayed"] != true || len(got) != 0 {
		t.Errorf("the replay: %+v %v, progress %q", res, err, got)
	}
}

func hasTool(tools []engine.ToolInfo, name string) bool {
	for _, ti := range tools {
		if ti.Name == name {
			return true
		}
	}
	return false
}
