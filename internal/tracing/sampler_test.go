package tracing_test

import (
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/carmyhq/carmy/internal/tracing"
)

// TestSampler: each sampler's decision for a root, a sampled parent and
// an unsampled one; the ratio samplers by the trace id's last 8 bytes,
// as OpenTelemetry's TraceIDRatioBased does.
func TestSampler(t *testing.T) {
	tid := trace.TraceID{1} // last 8 bytes 0: sampled by any ratio above 0
	parent := func(sampled bool) trace.SpanContext {
		cfg := trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}, Remote: true}
		if sampled {
			cfg.TraceFlags = trace.FlagsSampled
		}
		return trace.NewSpanContext(cfg)
	}
	low := trace.TraceID{8: 0x10}  // last 8 bytes >> 1: 0x08 << 56, a ratio of 1/16
	high := trace.TraceID{8: 0xf0} // 0x78 << 56, 15/16
	for _, c := range []struct {
		name                     string
		ratio                    float64
		root, sampled, unsampled bool
		lowRoot, highRoot        bool
	}{
		{"", 0, true, true, false, true, true},
		{"parentbased_always_on", 0, true, true, false, true, true},
		{"parentbased_always_off", 0, false, true, false, false, false},
		{"always_on", 0, true, true, true, true, true},
		{"always_off", 0, false, false, false, false, false},
		{"traceidratio", 0.5, true, true, true, true, false},
		{"traceidratio", 0, false, false, false, false, false},
		{"traceidratio", 1, true, true, true, true, true},
		{"parentbased_traceidratio", 0.5, true, true, false, true, false},
		{"parentbased_traceidratio", 0.01, true, true, false, false, false},
	} {
		s, err := tracing.NewSampler(c.name, c.ratio)
		if err != nil {
			t.Fatalf("NewSampler(%q, %v): %v", c.name, c.ratio, err)
		}
		if got := s.Sample(trace.SpanContext{}, tid); got != c.root {
			t.Errorf("%s: root sampled %v, want %v", s, got, c.root)
		}
		if got := s.Sample(parent(true), tid); got != c.sampled {
			t.Errorf("%s: child of a sampled parent sampled %v, want %v", s, got, c.sampled)
		}
		if got := s.Sample(parent(false), tid); got != c.unsampled {
			t.Errorf("%s: child of an unsampled parent sampled %v, want %v", s, got, c.unsampled)
		}
		if got := s.Sample(trace.SpanContext{}, low); got != c.lowRoot {
			t.Errorf("%s: root of a low trace id sampled %v, want %v", s, got, c.lowRoot)
		}
		if got := s.Sample(trace.SpanContext{}, high); got != c.highRoot {
			t.Errorf("%s: root of a high trace id sampled %v, want %v", s, got, c.highRoot)
		}
	}
	for _, bad := range []struct {
		name  string
		ratio float64
	}{{"sometimes", 0}, {"traceidratio", 1.5}, {"parentbased_traceidratio", -0.1}} {
		if _, err := tracing.NewSampler(bad.name, bad.ratio); err == nil {
			t.Errorf("NewSampler(%q, %v) succeeded", bad.name, bad.ratio)
		}
	}
}
