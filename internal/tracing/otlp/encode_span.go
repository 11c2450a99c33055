package otlp

import (
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/carmyhq/carmy/internal/tracing"
)

// Field numbers of opentelemetry.proto.trace.v1: Span (those Carmy
// writes) and Status.
const (
	spanTraceID      protowire.Number = 1
	spanSpanID       protowire.Number = 2
	spanTraceState   protowire.Number = 3
	spanParentSpanID protowire.Number = 4
	spanName         protowire.Number = 5
	spanKind         protowire.Number = 6
	spanStart        protowire.Number = 7
	spanEnd          protowire.Number = 8
	spanAttributes   protowire.Number = 9
	spanStatus       protowire.Number = 15
	spanFlags        protowire.Number = 16

	statusMessage protowire.Number = 2
	statusCode    protowire.Number = 3
)

// The bits of a span's flags above the W3C trace flags: the receiver is
// told whether the parent's context was remote.
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
// attributes, and its status (always present, as Status code and
// message). Carmy's spans have no events or links.
func appendSpan(b []byte, num protowire.Number, s *tracing.Record) []byte {
	b, start := openMessage(b, num)
	sc := s.Context
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendBytes(b, spanTraceID, tid[:])
	b = appendBytes(b, spanSpanID, sid[:])
	if ts := sc.TraceState(); ts.Len() > 0 {
		b = appendString(b, spanTraceState, ts.String())
	}
	if s.Parent.IsValid() {
		b = appendBytes(b, spanParentSpanID, s.Parent[:])
	}
	b = appendString(b, spanName, s.Name)
	b = appendVarint(b, spanKind, uint64(kind(s.Kind)))
	b = appendFixed64(b, spanStart, unixNano(s.Start))
	b = appendFixed64(b, spanEnd, unixNano(s.End))
	b = appendKeyValues(b, spanAttributes, s.Attributes)
	var st int
	b, st = openMessage(b, spanStatus)
	msg := ""
	if s.StatusCode == codes.Error {
		msg = s.StatusMessage
	}
	b = appendString(b, statusMessage, msg)
	b = appendVarint(b, statusCode, statusCodeOf(s.StatusCode))
	b = closeMessage(b, st)
	b = appendFixed32(b, spanFlags, flags(sc.TraceFlags(), s.ParentRemote))
	return closeMessage(b, start)
}

// flags is the W3C trace flags tf, with the bits that say whether the
// span's parent is remote.
func flags(tf trace.TraceFlags, remote bool) uint32 {
	f := uint32(tf) | flagHasIsRemote
	if remote {
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
