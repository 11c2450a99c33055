package tracing_test

import (
	"context"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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
// header or MCP _meta), the spans under contexts of their own are its
// children, and the trace context passed on is the child's.
func TestSpansOfACall(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { tracing.Use(nil) })

	for name, start := range map[string]func() (context.Context, trace.Span){
		"http": func() (context.Context, trace.Span) {
			return tracing.StartCallHTTP(context.Background(), http.Header{"Traceparent": {traceparent}})
		},
		"mcp": func() (context.Context, trace.Span) {
			return tracing.StartCallMeta(context.Background(), map[string]any{tracing.MetaTraceparent: traceparent})
		},
	} {
		ctx, call := start()
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
		if toolSC.TraceID() != callSC.TraceID() {
			t.Errorf("%s: the tool's span is in trace %s, not the call's", name, toolSC.TraceID())
		}
		want := "00-" + toolSC.TraceID().String() + "-" + toolSC.SpanID().String() + "-01"
		if h.Get("traceparent") != want || meta[tracing.MetaTraceparent] != want {
			t.Errorf("%s: passed on traceparent %q (header) %v (_meta), want %q", name, h.Get("traceparent"), meta[tracing.MetaTraceparent], want)
		}
	}
	ended := rec.Ended()
	if len(ended) != 4 {
		t.Fatalf("%d spans ended, want 4", len(ended))
	}
	for _, s := range ended {
		if s.Name() == tracing.SpanTool && !s.Parent().IsValid() {
			t.Errorf("the tool's span has no parent")
		}
	}
}
