package tracing

import (
	"context"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Record is what an ended span says, as the exporter sends it: one
// small struct per span, no interface and no copy.
type Record struct {
	// Context is the span's own: trace id, span id, trace flags (sampled)
	// and the trace state it inherited.
	Context trace.SpanContext
	// Parent is the span id of its parent, zero for a root;
	// ParentRemote says the parent came from a caller's trace context.
	Parent       trace.SpanID
	ParentRemote bool
	Name         string
	Kind         trace.SpanKind
	Start, End   time.Time
	Attributes   []attribute.KeyValue
	// StatusCode is codes.Unset or codes.Error (with StatusMessage).
	StatusCode    codes.Code
	StatusMessage string
}

// inlineAttributes is how many attributes a span holds without another
// allocation: one, as all but the call's span have (its six take one
// more).
const inlineAttributes = 1

// Span is a span being recorded, or a span that records nothing but
// carries its trace context on (an unsampled one). A nil *Span is the span
// of tracing off: every method does nothing. A span is used by one
// goroutine at a time; its SpanContext may be read by any.
type Span struct {
	rec   Record
	attrs [inlineAttributes]attribute.KeyValue
	p     *Provider // nil: not recording
	ended atomic.Bool
}

// SpanContext returns the span's trace context; the zero one for a nil
// span.
func (s *Span) SpanContext() trace.SpanContext {
	if s == nil {
		return trace.SpanContext{}
	}
	return s.rec.Context
}

// IsRecording reports whether the span is sampled and not yet ended:
// whether attributes set on it are exported.
func (s *Span) IsRecording() bool {
	return s != nil && s.p != nil && !s.ended.Load()
}

// SetAttributes adds attrs to a recording span.
func (s *Span) SetAttributes(attrs ...attribute.KeyValue) {
	if !s.IsRecording() {
		return
	}
	s.rec.Attributes = append(s.rec.Attributes, attrs...)
}

// SetStatus sets a recording span's status: codes.Error with a message,
// codes.Ok, or codes.Unset; the message is kept for an error only.
func (s *Span) SetStatus(code codes.Code, message string) {
	if !s.IsRecording() {
		return
	}
	s.rec.StatusCode = code
	s.rec.StatusMessage = ""
	if code == codes.Error {
		s.rec.StatusMessage = message
	}
}

// End ends the span: a recording one is handed to its provider's queue,
// or dropped and counted when the queue is full. It never waits. Only
// the first End counts.
func (s *Span) End() {
	if s == nil || s.p == nil || s.ended.Swap(true) {
		return
	}
	s.rec.End = time.Now()
	s.p.enqueue(s)
}

// spanKey is the key of a context's span.
type spanKey struct{}

// SpanFrom returns ctx's span, nil when it has none.
func SpanFrom(ctx context.Context) *Span {
	s, _ := ctx.Value(spanKey{}).(*Span)
	return s
}
