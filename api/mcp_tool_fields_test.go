package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/mcpgateway"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// TestMCPToolsListPassesUpstreamFields: tools/list shows an upstream
// tool's title, output schema and _meta as the upstream lists them (at
// 2025-11-25 and 2026-07-28, to the go-sdk client), but for a _meta key
// of Carmy's own (carmy/*), which an upstream's never stands for.
func TestMCPToolsListPassesUpstreamFields(t *testing.T) {
	up := sdk.NewServer(&sdk.Implementation{Name: "up", Version: "v1"}, nil)
	up.AddTool(&sdk.Tool{Name: "weather", Title: "Current weather",
		InputSchema:  map[string]any{"type": "object"},
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"celsius":{"type":"number"}},"required":["celsius"]}`),
		Meta:         sdk.Meta{"vendor.example/ui": map[string]any{"icon": "sun"}, "carmy/status": "completed"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{StructuredContent: map[string]any{"celsius": 21}}, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up }, nil))
	defer srv.Close()

	app, base := startOASNode(t, api.Config{Auth: oasAuth()})
	u, err := mcpgateway.New(app, mcpgateway.Config{Name: "up", URL: srv.URL, Logger: quietLogger(), MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	wait.Until(t, 30*time.Second, "up.weather to be listed", func() bool { return hasTool(app.Tools(), "up.weather") })

	for _, v := range []string{v1125, v0728} {
		cs := connectListener(t, base, oasPlanner, v).cs
		lt, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatalf("%s: tools/list: %v", v, err)
		}
		var got *sdk.Tool
		for _, tl := range lt.Tools {
			if tl.Name == "up.weather" {
				got = tl
			}
		}
		if got == nil {
			t.Fatalf("%s: tools/list has no up.weather", v)
		}
		if got.Title != "Current weather" {
			t.Errorf("%s: title %q, want the upstream's", v, got.Title)
		}
		schema, _ := json.Marshal(got.OutputSchema)
		if string(schema) != `{"properties":{"celsius":{"type":"number"}},"required":["celsius"],"type":"object"}` {
			t.Errorf("%s: outputSchema %s, want the upstream's", v, schema)
		}
		if ui, _ := got.Meta["vendor.example/ui"].(map[string]any); ui["icon"] != "sun" {
			t.Errorf("%s: _meta %v: want the upstream's vendor.example/ui", v, got.Meta)
		}
		if _, ok := got.Meta["carmy/status"]; ok {
			t.Errorf("%s: _meta %v: an upstream's carmy/status is listed", v, got.Meta)
		}
		// The tool is called as ever, its structured content the
		// schema's.
		res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "up.weather", Arguments: map[string]any{}})
		if err != nil {
			t.Fatalf("%s: the call: %v", v, err)
		}
		if sc, _ := res.StructuredContent.(map[string]any); res.IsError || sc["celsius"] != float64(21) {
			t.Errorf("%s: the call: %+v", v, res)
		}
	}
}
