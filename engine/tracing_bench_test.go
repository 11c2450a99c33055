package engine_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/tracing"
	"github.com/carmyhq/carmy/internal/tracing/otlp"
)

// BenchmarkRuntimeCallTracing measures what tracing costs a recorded new
// call (BenchmarkRuntimeCall's, on an in-memory store), the call's span
// started and ended around it as a transport does: "off" as a node runs
// without an OTLP endpoint, "on" with every span sampled, batched and
// exported by Carmy's exporter to a receiver on 127.0.0.1 that reads and
// counts what it is sent. The batching is the default but for a queue
// large enough (OTEL_BSP_MAX_QUEUE_SIZE) that the loop does not outrun
// the exporter and drop spans, which would cost less than exporting
// them. "on" reports spans/op, the spans the receiver got per call once
// the exporter has flushed (4 when none was dropped), and sent-B/op, the
// bytes of protobuf it got per call (docs/tracing.md).
func BenchmarkRuntimeCallTracing(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		tracing.Use(nil)
		benchTracedCalls(b, benchApp(b))
	})
	b.Run("on", func(b *testing.B) {
		var spans, sent atomic.Int64
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			sent.Add(int64(len(body)))
			spans.Add(int64(countSpans(body)))
		}))
		defer rcv.Close()
		env := map[string]string{otlp.EnvEndpoint: rcv.URL, tracing.EnvMaxQueueSize: "262144"}
		shutdown, err := otlp.Setup(context.Background(), func(k string) string { return env[k] }, "bench",
			slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		defer tracing.Use(nil)
		calls := benchTracedCalls(b, benchApp(b))
		b.StopTimer()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			b.Fatalf("flushing the spans: %v", err)
		}
		b.ReportMetric(float64(spans.Load())/float64(calls), "spans/op")
		b.ReportMetric(float64(sent.Load())/float64(calls), "sent-B/op")
	})
}

// benchTracedCalls makes recorded new calls under a call span, as
// BenchmarkRuntimeCall does, and returns how many it made.
func benchTracedCalls(b *testing.B, app *engine.Runtime) int64 {
	b.Helper()
	b.ReportAllocs()
	var n int64
	for b.Loop() {
		n++
		ctx, span := tracing.StartCallHTTP(context.Background(), nil)
		err := benchCall(ctx, app, n)
		tracing.SetCall(span, tracing.Call{Transport: "http", Principal: "alice", Tool: "echo", Outcome: "ran"})
		span.End()
		if err != nil {
			b.Fatal(err)
		}
	}
	return n
}

// countSpans counts the spans of an ExportTraceServiceRequest: the
// field 2 (spans) of each field 2 (scope spans) of each field 1
// (resource spans); -1 for a body that is not one.
func countSpans(body []byte) int {
	n := 0
	for _, rs := range messages(body, 1) {
		for _, ss := range messages(rs, 2) {
			n += len(messages(ss, 2))
		}
	}
	return n
}

// messages returns the length-delimited fields num of message b.
func messages(b []byte, num protowire.Number) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return out
		}
		b = b[l:]
		if l = protowire.ConsumeFieldValue(n, typ, b); l < 0 {
			return out
		}
		if n == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[:l])
			out = append(out, v)
		}
		b = b[l:]
	}
	return out
}
