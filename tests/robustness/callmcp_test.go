package robustness

import (
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/tests/robustness/ledgerapi"
	"github.com/carmyhq/carmy/tests/testutil"
)

// TestCallMCPAgainstANode: the workload's MCP call (internal/mcpclient),
// at each of its versions, runs on a real node's /mcp and is classified
// KindOK; the same request id again is a replay of the same execution.
// (The harness itself runs in the long tier only.)
func TestCallMCPAgainstANode(t *testing.T) {
	app := carmy.App(carmy.WithLogger(slog.New(slog.DiscardHandler)), carmy.WithDrainTimeout(time.Second))
	if err := app.AddDemoTools(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + testutil.Serve(t, app, api.Config{Logger: slog.New(slog.DiscardHandler)})
	c := &nodeClient{hc: &http.Client{Timeout: 10 * time.Second}}
	for _, version := range mcpVersions {
		first := c.callMCP(t.Context(), base, version, "echo", "mcp-"+version, ledgerapi.Args{Value: "v"})
		if first.kind != KindOK || first.replayed || first.status != "completed" || first.executionID == "" {
			t.Fatalf("%s: first call: %+v", version, first)
		}
		again := c.callMCP(t.Context(), base, version, "echo", "mcp-"+version, ledgerapi.Args{Value: "v"})
		if again.kind != KindOK || !again.replayed || again.executionID != first.executionID || again.result != first.result {
			t.Errorf("%s: the retry: %+v, want a replay of %+v", version, again, first)
		}
	}
}
