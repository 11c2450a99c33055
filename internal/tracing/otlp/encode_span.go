package otlp

import (
	"math"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of opentelemetry.proto.trace.v1: Span, Span.Event,
// Span.Link and Status.
const (
	spanTraceID           protowire.Number = 1
	spanSpanID            protowire.Number = 2
	spanTraceState        protowire.Number = 3
	spanParentSpanID      protowire.Number = 4
	spanName              protowire.Number = 5
	spanKind              protowire.Number = 6
	spanStart             protowire.Number = 7
	spanEnd               protowire.Number = 8
	spanAttributes        protowire.Number = 9
	spanDroppedAttributes protowire.Number = 10
	spanEvents            protowire.Number = 11
	spanDroppedEvents     protowire.Number = 12
	spanLinks             protowire.Number = 13
	spanDroppedLinks      protowire.Number = 14
	spanStatus            protowire.Number = 15
	spanFlags             protowire.Number = 16

	eventTime              protowire.Number = 1
	eventName              protowire.Number = 2
	eventAttributes        protowire.Number = 3
	eventDroppedAttributes protowire.Number = 4

	linkTraceID           protowire.Number = 1
	linkSpanID            protowire.Number = 2
	linkTraceState        protowire.Number = 3
	linkAttributes        protowire.Number = 4
	linkDroppedAttributes protowire.Number = 5
	linkFlags             protowire.Number = 6

	statusMessage protowire.Number = 2
	statusCode    protowire.Number = 3
)

// The bits of a span's or a link's flags above the W3C trace flags: the
// receiver is told whether the parent's (the link's) context was remote.
const (
	flagHasIsRemote uint32 = 0x100
	flagIsRemote    uint32 = 0x200
)

// The values of Status.code.
const (
	statusUnset = 0
	statusOK    = 1
	statusError = 2
)

// appendSpan appends s as Span field num: its trace and span ids, trace
// state, parent span id (when it has a parent), flags (the trace flags
// and whether the parent was remote), name, kind, start and end times,
// attributes, events, links, the counts of those the SDK dropped, and its
// status (always present, as Status code and message).
func appendSpan(b []byte, num protowire.Number, s sdktrace.ReadOnlySpan) []byte {
	b, start := openMessage(b, num)
	sc, parent := s.SpanContext(), s.Parent()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, spanTraceID, tid[:])
	b = appendBytes(b, spanSpanID, sid[:])
	b = appendString(b, spanTraceState, sc.TraceState().String())
	if psid := parent.SpanID(); psid.IsValid() {
		b = appendBytes(b, spanParentSpanID, psid[:])
	}
	b = appendString(b, spanName, s.Name())
	b = appendVarint(b, spanKind, uint64(kind(s.SpanKind())))
	b = appendFixed64(b, spanStart, unixNano(s.StartTime()))
	b = appendFixed64(b, spanEnd, unixNano(s.EndTime()))
	b = appendKeyValues(b, spanAttributes, s.Attributes())
	b = appendVarint(b, spanDroppedAttributes, count(s.DroppedAttributes()))
	for _, e := range s.Events() {
		var ev int
		b, ev = openMessage(b, spanEvents)
		b = appendFixed64(b, eventTime, unixNano(e.Time))
		b = appendString(b, eventName, e.Name)
		b = appendKeyValues(b, eventAttributes, e.Attributes)
		b = appendVarint(b, eventDroppedAttributes, count(e.DroppedAttributeCount))
		b = closeMessage(b, ev)
	}
	b = appendVarint(b, spanDroppedEvents, count(s.DroppedEvents()))
	for _, l := range s.Links() {
		var lk int
		b, lk = openMessage(b, spanLinks)
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		b = appendBytes(b, linkTraceID, ltid[:])
		b = appendBytes(b, linkSpanID, lsid[:])
		b = appendString(b, linkTraceState, l.SpanContext.TraceState().String())
		b = appendKeyValues(b, linkAttributes, l.Attributes)
		b = appendVarint(b, linkDroppedAttributes, count(l.DroppedAttributeCount))
		b = appendFixed32(b, linkFlags, flags(l.SpanContext.TraceFlags(), l.SpanContext))
		b = closeMessage(b, lk)
	}
	b = appendVarint(b, spanDroppedLinks, count(s.DroppedLinks()))
	var st int
	b, st = openMessage(b, spanStatus)
	status := s.Status()
	b = appendString(b, statusMessage, status.Description)
	b = appendVarint(b, statusCode, statusCodeOf(status.Code))
	b = closeMessage(b, st)
	b = appendFixed32(b, spanFlags, flags(sc.TraceFlags(), parent))
	return closeMessage(b, start)
}

// flags is the W3C trace flags tf, with the bits that say whether ctx
// (a span's parent, or a link's context) is remote.
func flags(tf trace.TraceFlags, ctx trace.SpanContext) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if ctx.IsRemote() {
		f |= flagIsRemote
	}
	return f
}

// kind is k as SpanKind: the API's values are OTLP's, an unknown one is
// unspecified (0).
func kind(k trace.SpanKind) trace.SpanKind {
	if k < trace.SpanKindUnspecified || k > trace.SpanKindConsumer {
		return trace.SpanKindUnspecified
	}
	return k
}

func statusCodeOf(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return statusOK
	case codes.Error:
		return statusError
	default:
		return statusUnset
	}
}

// unixNano is t in nanoseconds since the Unix epoch, 0 for a time before
// it (the zero time among them).
func unixNano(t time.Time) uint64 {
	if t.Before(epoch) {
		return 0
	}
	return uint64(t.UnixNano())
}

var epoch = time.Unix(0, 0)

// count is a dropped count as uint32, clamped.
func count(n int) uint64 {
	return uint64(min(max(n, 0), math.MaxUint32))
}
