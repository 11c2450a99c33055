package prom_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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

// scrape returns what h serves at GET /metrics.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d: %s", w.Code, w.Body)
	}
	return w.Body.String()
}
