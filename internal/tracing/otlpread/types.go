// Package otlpread decodes OTLP trace exports, the body of an OTLP/HTTP
// POST /v1/traces: an ExportTraceServiceRequest in binary protobuf
// (Decode), read with protowire alone, so nothing that imports it links
// generated OTLP code, or in OTLP/JSON (DecodeJSON).
//
// What is read: each resource's attributes, each scope's name and
// version, and of each span its ids, trace state, name, kind, start and
// end, attributes, events and status. Attribute values of every OTLP kind
// are read (string, bool, int, double, array, key-value list, bytes).
// Fields it does not know (links, dropped counts, schema URLs, fields of
// later versions) are skipped. Input that is not such a message — a
// truncated or malformed field, a known field of the wrong wire type, an
// id of the wrong length, values nested too deep — is an error, never a
// panic.
package otlpread

import (
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Request is a decoded ExportTraceServiceRequest.
type Request struct {
	Resources []ResourceSpans
}

// SpanCount returns how many spans r holds.
func (r *Request) SpanCount() int {
	n := 0
	for _, rs := range r.Resources {
		for _, ss := range rs.Scopes {
			n += len(ss.Spans)
		}
	}
	return n
}

// ResourceSpans is the spans of one resource (a process: service.name,
// service.instance.id…).
type ResourceSpans struct {
	Attributes []KeyValue
	Scopes     []ScopeSpans
}

// ScopeSpans is the spans of one instrumentation scope.
type ScopeSpans struct {
	Scope Scope
	Spans []Span
}

// Scope is an instrumentation scope: the library that made the spans.
type Scope struct {
	Name, Version string
}

// TraceID is a span's 16-byte trace id.
type TraceID [16]byte

// String returns the id in lowercase hex, as W3C trace context writes it.
func (id TraceID) String() string { return hex.EncodeToString(id[:]) }

// SpanID is a span's 8-byte id; the zero SpanID is "none" (a root's
// parent).
type SpanID [8]byte

// String returns the id in lowercase hex.
func (id SpanID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero id (no span).
func (id SpanID) IsZero() bool { return id == SpanID{} }

// SpanKind is OTLP's Span.SpanKind.
type SpanKind int32

// The span kinds.
const (
	KindUnspecified SpanKind = 0
	KindInternal    SpanKind = 1
	KindServer      SpanKind = 2
	KindClient      SpanKind = 3
	KindProducer    SpanKind = 4
	KindConsumer    SpanKind = 5
)

// String returns the kind as OpenTelemetry names it in lowercase
// ("server"), or "kind(N)" for one it does not know.
func (k SpanKind) String() string {
	switch k {
	case KindUnspecified:
		return "unspecified"
	case KindInternal:
		return "internal"
	case KindServer:
		return "server"
	case KindClient:
		return "client"
	case KindProducer:
		return "producer"
	case KindConsumer:
		return "consumer"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// StatusCode is OTLP's Status.StatusCode.
type StatusCode int32

// The status codes.
const (
	StatusUnset StatusCode = 0
	StatusOK    StatusCode = 1
	StatusError StatusCode = 2
)

// String returns "unset", "ok", "error", or "code(N)".
func (c StatusCode) String() string {
	switch c {
	case StatusUnset:
		return "unset"
	case StatusOK:
		return "ok"
	case StatusError:
		return "error"
	}
	return "code(" + strconv.Itoa(int(c)) + ")"
}

// Status is a span's status.
type Status struct {
	Code    StatusCode
	Message string
}

// Span is one span.
type Span struct {
	TraceID       TraceID
	SpanID        SpanID
	ParentSpanID  SpanID // zero for a root span
	TraceState    string
	Name          string
	Kind          SpanKind
	StartUnixNano uint64
	EndUnixNano   uint64
	Attributes    []KeyValue
	Events        []Event
	Status        Status
}

// Attr returns the value of the attribute key, and whether s has it.
func (s *Span) Attr(key string) (Value, bool) { return Lookup(s.Attributes, key) }

// Event is a timed annotation of a span.
type Event struct {
	TimeUnixNano uint64
	Name         string
	Attributes   []KeyValue
}

// KeyValue is one attribute.
type KeyValue struct {
	Key   string
	Value Value
}

// Lookup returns the value of the first attribute of attrs named key.
func Lookup(attrs []KeyValue, key string) (Value, bool) {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return Value{}, false
}

// ValueKind says which of Value's fields holds the value.
type ValueKind uint8

// The kinds of an attribute value; KindEmpty is a value with none set.
const (
	ValueEmpty ValueKind = iota
	ValueString
	ValueBool
	ValueInt
	ValueDouble
	ValueArray
	ValueKVList
	ValueBytes
)

// Value is OTLP's AnyValue: the field its Kind names holds it.
type Value struct {
	Kind   ValueKind
	Str    string
	Bool   bool
	Int    int64
	Double float64
	Array  []Value
	KVList []KeyValue
	Bytes  []byte
}

// String returns the value as text: a string as is, a bool, int or
// double in Go's formatting, bytes in hex, an array as [a, b], a list as
// {k: v, …}, and "" for an empty value.
func (v Value) String() string {
	switch v.Kind {
	case ValueString:
		return v.Str
	case ValueBool:
		return strconv.FormatBool(v.Bool)
	case ValueInt:
		return strconv.FormatInt(v.Int, 10)
	case ValueDouble:
		if math.IsInf(v.Double, 0) || math.IsNaN(v.Double) {
			return fmt.Sprint(v.Double)
		}
		return strconv.FormatFloat(v.Double, 'g', -1, 64)
	case ValueBytes:
		return hex.EncodeToString(v.Bytes)
	case ValueArray:
		parts := make([]string, len(v.Array))
		for i, e := range v.Array {
			parts[i] = e.String()
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case ValueKVList:
		parts := make([]string, len(v.KVList))
		for i, kv := range v.KVList {
			parts[i] = kv.Key + ": " + kv.Value.String()
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return ""
}
