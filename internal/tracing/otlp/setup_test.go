package otlp_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/tracing"
	"github.com/carmyhq/carmy/internal/tracing/otlp"
)

// setup turns tracing on to rcv with env added, logging to log; it is
// turned off at cleanup.
func setup(t *testing.T, rcv *receiver, log *slog.Logger, env map[string]string) func(context.Context) error {
	t.Helper()
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = rcv.URL
	shutdown, err := otlp.Setup(t.Context(), func(k string) string { return env[k] }, "node-1", log)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() { tracing.Use(nil) })
	return shutdown
}

// TestSetupFlushesAtShutdown: spans still queued (the batch is not due
// for a minute) are sent by shutdown, with the node's resource, the
// exporter's variables applied, and tracing is off after it.
func TestSetupFlushesAtShutdown(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "60000")
	rcv := startReceiver(t, nil)
	shutdown := setup(t, rcv, slog.New(slog.DiscardHandler), map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=carmy", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"})
	_, span := tracing.Start(t.Context(), tracing.SpanReserve)
	tracing.End(span, tracing.AttrOutcome, "reserved", nil)
	if n := len(rcv.requests(t)); n != 0 {
		t.Fatalf("%d requests before the batch was due", n)
	}
	if err := shutdown(t.Context()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if tracing.On() {
		t.Errorf("tracing still on after shutdown")
	}
	got := rcv.requests(t)
	if len(got) != 1 {
		t.Fatalf("%d requests after shutdown, want 1", len(got))
	}
	r := got[0]
	if r.path != "/v1/traces" || r.header.Get("X-Tenant") != "carmy" || r.header.Get("Content-Encoding") != "gzip" {
		t.Errorf("request to %s with headers %v", r.path, r.header)
	}
	rs := r.req.ResourceSpans[0]
	res := map[string]string{}
	for _, a := range rs.Resource.Attributes {
		res[a.Key] = a.Value.GetStringValue()
	}
	if res["service.name"] != "carmy" || res["service.instance.id"] != "node-1" {
		t.Errorf("resource %v, want service carmy, instance node-1", res)
	}
	ss := rs.ScopeSpans[0]
	if ss.Scope.Name != tracing.ScopeName || len(ss.Spans) != 1 || ss.Spans[0].Name != tracing.SpanReserve ||
		ss.Spans[0].Attributes[0].Value.GetStringValue() != "reserved" {
		t.Errorf("scope spans %v", ss)
	}
}

// syncBuffer is a log destination safe for the exporter's goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSetupLogsAFailedBatch: a batch the receiver refuses is a warning
// in the node's log.
func TestSetupLogsAFailedBatch(t *testing.T) {
	rcv := startReceiver(t, func(n int, w http.ResponseWriter) { http.Error(w, "no tenant", http.StatusUnauthorized) })
	var logs syncBuffer
	shutdown := setup(t, rcv, slog.New(slog.NewTextHandler(&logs, nil)), map[string]string{})
	_, span := tracing.Start(t.Context(), tracing.SpanTool)
	span.End()
	shutdown(t.Context())
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "spans not exported") ||
		!strings.Contains(out, "401") || !strings.Contains(out, "no tenant") {
		t.Errorf("log %q, want a warning with the 401 and its message", out)
	}
}

// TestSetupNeverSlowsACall: with the receiver stuck, a full queue drops
// spans and ending one never waits; shutdown gives up at its deadline.
func TestSetupNeverSlowsACall(t *testing.T) {
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "1")
	release := make(chan struct{})
	rcv := startReceiver(t, func(n int, w http.ResponseWriter) { <-release })
	t.Cleanup(func() { close(release) }) // before the receiver closes: cleanups run last first
	shutdown := setup(t, rcv, slog.New(slog.DiscardHandler), map[string]string{})

	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10_000 {
			_, span := tracing.Start(context.Background(), tracing.SpanReserve)
			span.End()
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("10 000 spans not ended in 10s with the receiver stuck: ending a span waits for the export")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	shutdown(ctx)
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("shutdown took %s with a 200ms deadline", took)
	}
}

// TestSetupRefusesWhatItCannotDo: another protocol than http/protobuf,
// or a variable the exporter cannot use, stops Setup, tracing off.
func TestSetupRefusesWhatItCannotDo(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
	} {
		if _, err := otlp.Setup(t.Context(), func(k string) string { return env[k] }, "n", slog.New(slog.DiscardHandler)); err == nil {
			t.Errorf("Setup(%v) succeeded", env)
		}
		if tracing.On() {
			t.Errorf("Setup(%v) turned tracing on", env)
			tracing.Use(nil)
		}
	}
}
