package prom_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/metrics/prom"
)

// New attaches the metrics to a runtime; give them to Serve as
// api.Config.Metrics to serve them at /metrics (here, their handler is
// read directly).
func ExampleNew() {
	app := carmy.App(carmy.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	app.Tool("echo", func(ctx context.Context, call carmy.Call) (any, error) { return call.Arguments, nil })
	m := prom.New(app.Engine()) // before the first call
	// err := app.Serve(ctx, ln, api.Config{Metrics: m, MCP: mcp.Endpoint})

	if _, err := app.Call(context.Background(), carmy.Caller{Principal: "planner"}, carmy.Request{Tool: "echo", RequestID: "r1"}); err != nil {
		fmt.Println(err)
		return
	}
	w := httptest.NewRecorder()
	m.Handler(slog.Default()).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for line := range strings.Lines(w.Body.String()) {
		if strings.HasPrefix(line, "carmy_tool_duration_seconds_count") || strings.HasPrefix(line, "carmy_store_entries ") {
			fmt.Print(line)
		}
	}
	// Output:
	// carmy_store_entries 1
	// carmy_tool_duration_seconds_count{status="completed",tool="echo"} 1
}
