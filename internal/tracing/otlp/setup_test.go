package otlp_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"slices"
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
	rcv := startReceiver(t, nil)
	shutdown := setup(t, rcv, slog.New(slog.DiscardHandler), map[string]string{"OTEL_BSP_SCHEDULE_DELAY": "60000",
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
	if res["service.name"] != "carmy" || res["service.instance.id"] != "node-1" || res["telemetry.sdk.name"] != "carmy" {
		t.Errorf("resource %v, want service carmy, instance node-1, sdk carmy", res)
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
	release := make(chan struct{})
	rcv := startReceiver(t, func(n int, w http.ResponseWriter) { <-release })
	t.Cleanup(func() { close(release) }) // before the receiver closes: cleanups run last first
	shutdown := setup(t, rcv, slog.New(slog.DiscardHandler), map[string]string{
		"OTEL_BSP_MAX_QUEUE_SIZE": "8", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "2", "OTEL_BSP_SCHEDULE_DELAY": "1"})

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

// TestSetupResourceFromEnv: OTEL_RESOURCE_ATTRIBUTES (percent-decoded)
// overrides the node's defaults, and OTEL_SERVICE_NAME overrides both.
func TestSetupResourceFromEnv(t *testing.T) {
	rcv := startReceiver(t, nil)
	shutdown := setup(t, rcv, slog.New(slog.DiscardHandler), map[string]string{
		"OTEL_RESOURCE_ATTRIBUTES": "service.name=ignored, deployment.environment=prod%20eu,service.instance.id=n9",
		"OTEL_SERVICE_NAME":        "idem"})
	_, span := tracing.Start(t.Context(), tracing.SpanTool)
	span.End()
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := rcv.requests(t)
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	var keys []string
	res := map[string]string{}
	for _, a := range got[0].req.ResourceSpans[0].Resource.Attributes {
		keys = append(keys, a.Key)
		res[a.Key] = a.Value.GetStringValue()
	}
	if res["service.name"] != "idem" || res["service.instance.id"] != "n9" || res["deployment.environment"] != "prod eu" ||
		!slices.IsSorted(keys) {
		t.Errorf("resource %v (keys %v), want idem, n9, prod eu, sorted by key", res, keys)
	}
}

// TestSetupRefusesWhatItCannotDo: another protocol than http/protobuf,
// or a variable it cannot use, stops Setup with an error naming the
// variable, tracing off.
func TestSetupRefusesWhatItCannotDo(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"OTEL_EXPORTER_OTLP_PROTOCOL":    {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		"OTEL_EXPORTER_OTLP_COMPRESSION": {"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
		"OTEL_TRACES_SAMPLER":            {"OTEL_TRACES_SAMPLER": "sometimes"},
		"OTEL_TRACES_SAMPLER_ARG":        {"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"},
		"OTEL_BSP_SCHEDULE_DELAY":        {"OTEL_BSP_SCHEDULE_DELAY": "soon"},
		"OTEL_BSP_EXPORT_TIMEOUT":        {"OTEL_BSP_EXPORT_TIMEOUT": "0"},
		"OTEL_BSP_MAX_QUEUE_SIZE":        {"OTEL_BSP_MAX_QUEUE_SIZE": "-5"},
		"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "x"},
		"OTEL_RESOURCE_ATTRIBUTES":       {"OTEL_RESOURCE_ATTRIBUTES": "service.name"},
	} {
		env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:4318"
		_, err := otlp.Setup(t.Context(), func(k string) string { return env[k] }, "n", slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Setup(%v) = %v, want an error naming %s", env, err, name)
		}
		if tracing.On() {
			t.Errorf("Setup(%v) turned tracing on", env)
			tracing.Use(nil)
		}
	}
}
