package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

var alice = engine.Caller{Principal: "alice"}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newApp returns a runtime with a quiet logger, shut down at cleanup.
func newApp(t *testing.T, opts ...engine.Option) *engine.Runtime {
	t.Helper()
	app := engine.New(append([]engine.Option{engine.WithLogger(quietLogger())}, opts...)...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := app.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return app
}

func mustAdd(t *testing.T, app *engine.Runtime, spec engine.ToolSpec) {
	t.Helper()
	if err := app.AddTool(spec); err != nil {
		t.Fatalf("AddTool(%s): %v", spec.Name, err)
	}
}

// counter is a tool that counts its runs and returns the count.
type counter struct{ runs atomic.Int64 }

func (c *counter) fn(_ context.Context, call engine.Call) (any, error) {
	n := c.runs.Add(1)
	return map[string]any{"run": n, "args": call.Arguments}, nil
}

// gate is a tool that blocks until released (or its context ends).
type gate struct {
	started chan string // execution ids, as the tool starts
	release chan struct{}
	sawCtx  chan error
	runs    atomic.Int64
}

func newGate() *gate {
	return &gate{started: make(chan string, 100), release: make(chan struct{}), sawCtx: make(chan error, 100)}
}

func (g *gate) fn(ctx context.Context, call engine.Call) (any, error) {
	g.runs.Add(1)
	g.started <- call.ExecutionID
	select {
	case <-g.release:
		return "released", nil
	case <-ctx.Done():
		g.sawCtx <- ctx.Err()
		return "too late", ctx.Err()
	}
}

func call(t *testing.T, app *engine.Runtime, req engine.Request) engine.Response {
	t.Helper()
	resp, err := app.Call(t.Context(), alice, req)
	if err != nil {
		t.Fatalf("Call(%s, %s): %v", req.Tool, req.RequestID, err)
	}
	return resp
}

func mustStatus(t *testing.T, rec store.Record, want store.Status) {
	t.Helper()
	if rec.Status != want {
		t.Fatalf("status = %s, want %s (record %+v, error %s)", rec.Status, want, rec, rec.Error)
	}
}

func errorCode(t *testing.T, rec store.Record) (code, msg string) {
	t.Helper()
	var b store.ErrorBody
	if err := json.Unmarshal(rec.Error, &b); err != nil {
		t.Fatalf("record error %q: %v", rec.Error, err)
	}
	return b.Code, b.Message
}

func wantErrIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
}

func wantField(t *testing.T, err error, field string) {
	t.Helper()
	var fe *store.FieldError
	if !errors.As(err, &fe) || fe.Field != field {
		t.Fatalf("err = %v, want a FieldError on %q", err, field)
	}
	if store.CodeOf(err) != "INVALID_REQUEST" {
		t.Fatalf("code = %q, want INVALID_REQUEST", store.CodeOf(err))
	}
}
