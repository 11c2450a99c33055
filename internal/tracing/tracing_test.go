package tracing_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/carmyhq/carmy/internal/tracing"
)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestOffCostsNoAllocation: with tracing off, the helpers on the path of
// a call allocate nothing, and read and pass on no trace context.
func TestOffCostsNoAllocation(t *testing.T) {
	tracing.Use(nil)
	ctx := context.Background()
	in := http.Header{"Traceparent": {traceparent}}
	out := http.Header{}
	meta := map[string]any{tracing.MetaTraceparent: traceparent}
	allocs := testing.AllocsPerRun(100, func() {
		cctx, call := tracing.StartCallHTTP(ctx, in)
		mctx, mcall := tracing.StartCallMeta(ctx, meta)
		parent := tracing.Parent(cctx)
		rctx, reserve := tracing.Start(cctx, tracing.SpanReserve)
		tracing.End(reserve, tracing.AttrOutcome, "reserved", nil)
		tctx, tool := tracing.StartUnder(ctx, parent, tracing.SpanTool)
		tracing.InjectHeader(tctx, out)
		tracing.InjectMeta(mctx, meta)
		tracing.End(tool, tracing.AttrStatus, "completed", nil)
		tracing.SetCall(call, tracing.Call{Transport: "http", Tool: "t"})
		call.End()
		mcall.End()
		_ = rctx
	})
	if allocs != 0 {
		t.Errorf("tracing off: %v allocations per call, want 0", allocs)
	}
	if len(out) != 0 || len(meta) != 1 {
		t.Errorf("tracing off passed trace context on: header %v, meta %v", out, meta)
	}
}

// TestSpansOfACall: the call's span continues the caller's trace (HTTP
// header or MCP _meta, trace state included), the spans under contexts
// of their own are its children, the trace context passed on is the
// child's, and each span is exported with its name, kind, parent,
// attributes and status.
func TestSpansOfACall(t *testing.T) {
	rec := &recorder{}
	p := use(t, rec, tracing.Options{})
	for name, start := range map[string]func() (context.Context, *tracing.Span){
		"http": func() (context.Context, *tracing.Span) {
			return tracing.StartCallHTTP(context.Background(), http.Header{"Traceparent": {traceparent}, "Tracestate": {"vendor=x"}})
		},
		"mcp": func() (context.Context, *tracing.Span) {
			return tracing.StartCallMeta(context.Background(), map[string]any{
				tracing.MetaTraceparent: traceparent, tracing.MetaTracestate: "vendor=x"})
		},
	} {
		ctx, call := start()
		rctx, reserve := tracing.Start(ctx, tracing.SpanReserve)
		tracing.End(reserve, tracing.AttrOutcome, "error", errors.New("the store failed"))
		_ = rctx
		tctx, tool := tracing.StartUnder(context.Background(), tracing.Parent(ctx), tracing.SpanTool)
		h, meta := http.Header{}, map[string]any{}
		tracing.InjectHeader(tctx, h)
		tracing.InjectMeta(tctx, meta)
		tracing.End(tool, tracing.AttrStatus, "completed", nil)
		tracing.SetCall(call, tracing.Call{Transport: name, Tool: "order", Outcome: "ran"})
		call.End()

		callSC, toolSC := call.SpanContext(), tool.SpanContext()
		if got := callSC.TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("%s: the call's trace %s, want the caller's", name, got)
		}
		if toolSC.TraceID() != callSC.TraceID() || reserve.SpanContext().TraceID() != callSC.TraceID() {
			t.Errorf("%s: the tool's or the reservation's span is not in the call's trace", name)
		}
		want := "00-" + toolSC.TraceID().String() + "-" + toolSC.SpanID().String() + "-01"
		if h.Get("traceparent") != want || meta[tracing.MetaTraceparent] != want {
			t.Errorf("%s: passed on traceparent %q (header) %v (_meta), want %q", name, h.Get("traceparent"), meta[tracing.MetaTraceparent], want)
		}
		if h.Get("tracestate") != "vendor=x" || meta[tracing.MetaTracestate] != "vendor=x" {
			t.Errorf("%s: passed on tracestate %q (header) %v (_meta), want the caller's", name, h.Get("tracestate"), meta[tracing.MetaTracestate])
		}
	}
	flush(t, p)
	ended := rec.spans()
	if len(ended) != 6 {
		t.Fatalf("%d spans exported, want 6", len(ended))
	}
	caller := trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	calls := map[trace.SpanID]bool{}
	for _, s := range ended {
		if s.Name == tracing.SpanCall {
			calls[s.Context.SpanID()] = true
		}
	}
	for _, s := range ended {
		if s.End.Before(s.Start) || s.Start.IsZero() || !s.Context.IsSampled() {
			t.Errorf("%s: start %v end %v, sampled %v", s.Name, s.Start, s.End, s.Context.IsSampled())
		}
		switch s.Name {
		case tracing.SpanCall:
			attrs := attribute.NewSet(s.Attributes...)
			if v, _ := attrs.Value(tracing.AttrTool); s.Parent != caller || !s.ParentRemote || s.Kind != trace.SpanKindServer ||
				v.AsString() != "order" || len(s.Attributes) != 6 || s.StatusCode != codes.Unset {
				t.Errorf("the call's span: %+v", s)
			}
		case tracing.SpanReserve:
			if !calls[s.Parent] || s.ParentRemote || s.Kind != trace.SpanKindInternal || s.StatusCode != codes.Error ||
				s.StatusMessage != "the store failed" || len(s.Attributes) != 1 || s.Attributes[0].Value.AsString() != "error" {
				t.Errorf("the reservation's span: %+v", s)
			}
		case tracing.SpanTool:
			if !calls[s.Parent] || s.StatusCode != codes.Unset || s.Attributes[0] != tracing.AttrStatus.String("completed") {
				t.Errorf("the tool's span: %+v", s)
			}
		default:
			t.Errorf("span %q", s.Name)
		}
		if s.Context.TraceState().String() != "vendor=x" {
			t.Errorf("%s: trace state %q, want the caller's", s.Name, s.Context.TraceState())
		}
	}
}

// TestCallerContext: a call without trace context (or with one that is
// not valid) is the root of a new trace; an unsampled caller's is obeyed
// by the default sampler: nothing is recorded, and the unsampled context
// is passed on.
func TestCallerContext(t *testing.T) {
	rec := &recorder{}
	p := use(t, rec, tracing.Options{})
	for _, tp := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"} {
		_, call := tracing.StartCallHTTP(context.Background(), http.Header{"Traceparent": {tp}})
		sc := call.SpanContext()
		if !sc.IsValid() || sc.TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736" || !sc.IsSampled() || !call.IsRecording() {
			t.Errorf("traceparent %q: the call's context %v, want a new sampled root", tp, sc)
		}
		call.End()
	}
	unsampled := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	ctx, call := tracing.StartCallMeta(context.Background(), map[string]any{tracing.MetaTraceparent: unsampled})
	if call.IsRecording() || call.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("an unsampled caller's call: recording %v, context %v", call.IsRecording(), call.SpanContext())
	}
	h := http.Header{}
	tracing.InjectHeader(ctx, h)
	if got := h.Get("traceparent"); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-"+call.SpanContext().SpanID().String()+"-00" {
		t.Errorf("an unsampled call passed on %q", got)
	}
	call.End()
	flush(t, p)
	if n := len(rec.spans()); n != 5 {
		t.Errorf("%d spans exported, want the 5 roots", n)
	}
}

// BenchmarkSpan measures a span started and ended with tracing on, the
// child of another, exported to an exporter that drops the batches.
func BenchmarkSpan(b *testing.B) {
	p := tracing.NewProvider(discard{}, tracing.Options{})
	tracing.Use(p)
	defer func() {
		tracing.Use(nil)
		p.Shutdown(context.Background())
	}()
	ctx, call := tracing.StartCallHTTP(context.Background(), nil)
	defer call.End()
	b.ReportAllocs()
	for b.Loop() {
		_, span := tracing.Start(ctx, tracing.SpanReserve)
		tracing.End(span, tracing.AttrOutcome, "reserved", nil)
	}
}

type discard struct{}

func (discard) Export(context.Context, []*tracing.Record) error { return nil }
