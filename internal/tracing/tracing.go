// Package tracing is Carmy's tracer: the spans of a call (Span, small
// records), their sampling (Sampler), their batching (Provider), the
// helpers the path of a call uses to make them, and the W3C trace context
// carried in and out (docs/tracing.md). It uses the OpenTelemetry API's
// types (ids, attributes, status codes) but not its SDK: a span is one
// allocation and ends into a bounded queue. The exporter that sends the
// batches over OTLP/HTTP is set up from the environment by package
// tracing/otlp, which only the binary imports.
//
// Tracing is off until Use is given a provider. Off, every helper returns
// at once after one atomic load: no span (a nil *Span, whose methods do
// nothing), no context, no allocation, and no trace context is read from
// a request or passed on to a tool.
package tracing

import (
	"context"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of Carmy's spans.
const ScopeName = "github.com/carmyhq/carmy"

// The spans of one call (docs/tracing.md).
const (
	// SpanCall is the call, as the transport received it (a server span).
	SpanCall = "carmy.call"
	// SpanReserve is the reservation of the call's identity in the store.
	SpanReserve = "carmy.reserve"
	// SpanTool is the tool's run on this node.
	SpanTool = "carmy.tool"
	// SpanComplete is the recording of the call's outcome.
	SpanComplete = "carmy.complete"
	// SpanForward is a follower's command forwarded to the Raft leader.
	SpanForward = "carmy.forward"
)

// The attributes of Carmy's spans.
const (
	AttrTool        = attribute.Key("carmy.tool")
	AttrOutcome     = attribute.Key("carmy.outcome")
	AttrReplayed    = attribute.Key("carmy.replayed")
	AttrExecutionID = attribute.Key("carmy.execution_id")
	AttrPrincipal   = attribute.Key("carmy.principal")
	AttrTransport   = attribute.Key("carmy.transport")
	AttrStatus      = attribute.Key("carmy.status")
	AttrLeader      = attribute.Key("carmy.leader")
)

// The keys of an MCP request's params._meta that carry W3C trace context
// (MCP 2026-07-28), and of a tools/call Carmy sends to an upstream server.
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// current is the provider while tracing is on, nil while it is off.
var current atomic.Pointer[Provider]

// Use turns tracing on with p, or off when p is nil. It is safe to call
// at any time; spans already started end as they began.
func Use(p *Provider) { current.Store(p) }

// On reports whether tracing is on.
func On() bool { return current.Load() != nil }

// Start starts a span named name as a child of ctx's span. Off, it
// returns ctx and a nil span.
func Start(ctx context.Context, name string) (context.Context, *Span) {
	p := current.Load()
	if p == nil {
		return ctx, nil
	}
	return p.start(ctx, SpanFrom(ctx).SpanContext(), name, trace.SpanKindInternal)
}

// StartUnder starts a span named name in ctx as a child of parent (the
// span of another context: Parent's), for work that runs under a context
// of its own (a tool, the recording of its outcome). Off, it returns ctx
// and a nil span.
func StartUnder(ctx context.Context, parent *Span, name string) (context.Context, *Span) {
	p := current.Load()
	if p == nil {
		return ctx, nil
	}
	return p.start(ctx, parent.SpanContext(), name, trace.SpanKindInternal)
}

// Parent returns ctx's span, for StartUnder; nil while tracing is off.
func Parent(ctx context.Context) *Span {
	if current.Load() == nil {
		return nil
	}
	return SpanFrom(ctx)
}

// StartCallHTTP starts the span of a call received over HTTP, a child of
// the W3C trace context its headers carry (traceparent, tracestate), or
// the root of a new trace.
func StartCallHTTP(ctx context.Context, h http.Header) (context.Context, *Span) {
	p := current.Load()
	if p == nil {
		return ctx, nil
	}
	return p.start(ctx, fromHeader(h), SpanCall, trace.SpanKindServer)
}

// StartCallMeta starts the span of a call received over MCP, a child of
// the W3C trace context its params._meta carries (the traceparent and
// tracestate keys, strings), or the root of a new trace.
func StartCallMeta(ctx context.Context, meta map[string]any) (context.Context, *Span) {
	p := current.Load()
	if p == nil {
		return ctx, nil
	}
	return p.start(ctx, fromMeta(meta), SpanCall, trace.SpanKindServer)
}

// InjectHeader sets in h the W3C trace context of ctx's span, for an HTTP
// request that carries the call on. Off, or without a span, it sets
// nothing.
func InjectHeader(ctx context.Context, h http.Header) {
	if current.Load() == nil {
		return
	}
	sc := SpanFrom(ctx).SpanContext()
	if !sc.IsValid() {
		return
	}
	h.Set(headerTraceparent, formatTraceparent(sc))
	if ts := sc.TraceState(); ts.Len() > 0 {
		h.Set(headerTracestate, ts.String())
	}
}

// InjectMeta sets in meta (an MCP request's params._meta) the W3C trace
// context of ctx's span under MetaTraceparent and MetaTracestate. Off, or
// without a span, it sets nothing.
func InjectMeta(ctx context.Context, meta map[string]any) {
	if current.Load() == nil || meta == nil {
		return
	}
	sc := SpanFrom(ctx).SpanContext()
	if !sc.IsValid() {
		return
	}
	meta[MetaTraceparent] = formatTraceparent(sc)
	if ts := sc.TraceState(); ts.Len() > 0 {
		meta[MetaTracestate] = ts.String()
	}
}

// Call is what the span of a call says of it.
type Call struct {
	Transport, Principal, Tool string
	ExecutionID, Outcome       string
	Replayed                   bool
}

// SetCall sets c's attributes on span, the span of a call; it does
// nothing to a span that records nothing.
func SetCall(span *Span, c Call) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		AttrTransport.String(c.Transport), AttrPrincipal.String(c.Principal), AttrTool.String(c.Tool),
		AttrExecutionID.String(c.ExecutionID), AttrOutcome.String(c.Outcome), AttrReplayed.Bool(c.Replayed))
}

// End ends span with the attribute key=value (none when key is empty), an
// error status when err is not nil.
func End(span *Span, key attribute.Key, value string, err error) {
	if span.IsRecording() {
		if key != "" {
			span.SetAttributes(key.String(value))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
