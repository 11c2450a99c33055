package api_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
)

// newEngine returns a real runtime with the echo tool and tools, shut
// down at cleanup: for the API's answers to what the runtime decides (the
// rules of a call, authorization), which a fake would only repeat.
func newEngine(t *testing.T, tools ...string) *engine.Runtime {
	t.Helper()
	rt := engine.New(engine.WithLogger(slog.New(slog.DiscardHandler)))
	echo := func(_ context.Context, c engine.Call) (any, error) { return c.Arguments, nil }
	for _, name := range append([]string{"echo"}, tools...) {
		if err := rt.AddTool(engine.ToolSpec{Name: name, Func: echo}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return rt
}
