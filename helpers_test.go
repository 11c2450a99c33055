package carmy_test

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newApp returns an App with a quiet logger, shut down at cleanup.
func newApp(t *testing.T, opts ...carmy.Option) *carmy.Runtime {
	t.Helper()
	app := carmy.App(append([]carmy.Option{carmy.WithLogger(quietLogger())}, opts...)...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := app.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return app
}

func mustAdd(t *testing.T, app *carmy.Runtime, spec carmy.ToolSpec) {
	t.Helper()
	if err := app.AddTool(spec); err != nil {
		t.Fatalf("AddTool(%s): %v", spec.Name, err)
	}
}

// counter is a tool that counts its runs and returns the count.
type counter struct{ runs atomic.Int64 }

func (c *counter) fn(_ context.Context, call carmy.Call) (any, error) {
	n := c.runs.Add(1)
	return map[string]any{"run": n, "args": call.Arguments}, nil
}
