package otlp_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/carmyhq/carmy/internal/tracing"
	"github.com/carmyhq/carmy/internal/tracing/otlp"
)

// twoSpans is a batch of two spans.
func twoSpans() []*tracing.Record {
	a, _ := rootSpan("carmy.reserve")
	b, _ := rootSpan("carmy.tool")
	return []*tracing.Record{a, b}
}

func newExporter(t *testing.T, cfg otlp.Config) *otlp.Exporter {
	t.Helper()
	exp, err := otlp.NewExporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exp.Shutdown(t.Context()) })
	return exp
}

// protobufAnswer writes msg as the protobuf answer of status code.
func protobufAnswer(w http.ResponseWriter, code int, msg proto.Message) {
	out, _ := proto.Marshal(msg)
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(code)
	w.Write(out)
}

// TestExporterPostsABatch: one batch is one POST of binary protobuf to
// the URL, with the configured headers, gzipped when asked.
func TestExporterPostsABatch(t *testing.T) {
	for _, gz := range []bool{false, true} {
		rcv := startReceiver(t, nil)
		exp := newExporter(t, otlp.Config{URL: rcv.URL + "/otlp/v1/traces", Gzip: gz,
			Header: http.Header{"Authorization": {"Bearer s3cret"}}})
		if err := exp.Export(t.Context(), twoSpans()); err != nil {
			t.Fatalf("gzip %v: Export: %v", gz, err)
		}
		got := rcv.requests(t)
		if len(got) != 1 {
			t.Fatalf("gzip %v: %d requests, want 1", gz, len(got))
		}
		r := got[0]
		if r.path != "/otlp/v1/traces" || r.header.Get("Content-Type") != "application/x-protobuf" ||
			r.header.Get("Authorization") != "Bearer s3cret" || !strings.HasPrefix(r.header.Get("User-Agent"), "carmy/") {
			t.Errorf("gzip %v: request to %s with headers %v", gz, r.path, r.header)
		}
		if enc := r.header.Get("Content-Encoding"); (enc == "gzip") != gz {
			t.Errorf("gzip %v: Content-Encoding %q", gz, enc)
		}
		if names := spanNames(r); strings.Join(names, ",") != "carmy.reserve,carmy.tool" {
			t.Errorf("gzip %v: spans %v, want carmy.reserve and carmy.tool", gz, names)
		}
	}
}

// TestExporterRetriesWhenBusy: 429 and 503 are tried again, after the
// Retry-After the answer gives (1 s), or else after the backoff; the
// same body each time.
func TestExporterRetriesWhenBusy(t *testing.T) {
	rcv := startReceiver(t, func(n int, w http.ResponseWriter) {
		switch n {
		case 0:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case 1:
			http.Error(w, "restarting", http.StatusServiceUnavailable)
		default:
			protobufAnswer(w, http.StatusOK, &coltracepb.ExportTraceServiceResponse{})
		}
	})
	exp := newExporter(t, otlp.Config{URL: rcv.URL + "/v1/traces", Backoff: 10 * time.Millisecond, Timeout: 10 * time.Second})
	if err := exp.Export(t.Context(), twoSpans()); err != nil {
		t.Fatalf("Export: %v", err)
	}
	got := rcv.requests(t)
	if len(got) != 3 {
		t.Fatalf("%d requests, want 3 (429, 503, 200)", len(got))
	}
	if wait := got[1].at.Sub(got[0].at); wait < time.Second {
		t.Errorf("retried %s after a 429 with Retry-After: 1, want at least 1s", wait)
	}
	if wait := got[2].at.Sub(got[1].at); wait > 900*time.Millisecond {
		t.Errorf("retried %s after a 503 without Retry-After, want the 10ms backoff", wait)
	}
	for _, r := range got[1:] {
		if !proto.Equal(r.req, got[0].req) {
			t.Errorf("a retry sent another body")
		}
	}
}

// TestExporterGivesUpPastItsTimeout: a Retry-After beyond the export's
// timeout is not waited for: the batch fails at once.
func TestExporterGivesUpPastItsTimeout(t *testing.T) {
	rcv := startReceiver(t, func(n int, w http.ResponseWriter) {
		w.Header().Set("Retry-After", "3600")
		http.Error(w, "come back later", http.StatusServiceUnavailable)
	})
	exp := newExporter(t, otlp.Config{URL: rcv.URL + "/v1/traces", Timeout: 5 * time.Second})
	began := time.Now()
	err := exp.Export(t.Context(), twoSpans())
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("Export = %v, want the 503 and the timeout", err)
	}
	if took := time.Since(began); took > 4*time.Second {
		t.Errorf("gave up after %s, want at once", took)
	}
	if n := len(rcv.requests(t)); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestExporterReportsRefusals: a refusal (400) is not retried and its
// google.rpc.Status message is in the error; a partial success is an
// error that says how many spans were rejected.
func TestExporterReportsRefusals(t *testing.T) {
	refuse := startReceiver(t, func(n int, w http.ResponseWriter) {
		protobufAnswer(w, http.StatusBadRequest, &status.Status{Code: 3, Message: "span ids must be 8 bytes"})
	})
	err := newExporter(t, otlp.Config{URL: refuse.URL + "/v1/traces"}).Export(t.Context(), twoSpans())
	if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "span ids must be 8 bytes") {
		t.Errorf("refused: Export = %v, want the 400 and its message", err)
	}
	if n := len(refuse.requests(t)); n != 1 {
		t.Errorf("refused: %d requests, want 1", n)
	}

	partial := startReceiver(t, func(n int, w http.ResponseWriter) {
		protobufAnswer(w, http.StatusOK, &coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{
			RejectedSpans: 1, ErrorMessage: "too old"}})
	})
	err = newExporter(t, otlp.Config{URL: partial.URL + "/v1/traces"}).Export(t.Context(), twoSpans())
	if err == nil || !strings.Contains(err.Error(), "rejected 1 spans: too old") {
		t.Errorf("partial success: Export = %v, want 1 rejected, too old", err)
	}
}

// TestExporterShutdown: once shut down, the exporter sends nothing.
func TestExporterShutdown(t *testing.T) {
	rcv := startReceiver(t, nil)
	exp := newExporter(t, otlp.Config{URL: rcv.URL + "/v1/traces"})
	if err := exp.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := exp.Export(t.Context(), twoSpans()); err == nil {
		t.Errorf("Export after Shutdown succeeded")
	}
	if n := len(rcv.requests(t)); n != 0 {
		t.Errorf("%d requests after Shutdown", n)
	}
}
