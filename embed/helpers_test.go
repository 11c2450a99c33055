package embed_test

import (
	"context"
	"io"
	"log/slog"
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
