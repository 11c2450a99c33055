package otlp

import (
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/carmyhq/carmy/internal/tracing"
)

// Field numbers of ExportTraceServiceRequest
// (opentelemetry.proto.collector.trace.v1), ResourceSpans, ScopeSpans
// (opentelemetry.proto.trace.v1), Resource (resource.v1) and
// InstrumentationScope (common.v1).
const (
	requestResourceSpans protowire.Number = 1

	resourceSpansResource   protowire.Number = 1
	resourceSpansScopeSpans protowire.Number = 2

	scopeSpansScope protowire.Number = 1
	scopeSpansSpans protowire.Number = 2

	resourceAttributes protowire.Number = 1

	scopeName    protowire.Number = 1
	scopeVersion protowire.Number = 2
)

// Resource is what the spans of an export are of: the resource's
// attributes (service.name…, in the order given: sorted by key, as
// OpenTelemetry keeps them) and the instrumentation scope's name and
// version.
type Resource struct {
	Attributes   []attribute.KeyValue
	ScopeName    string
	ScopeVersion string
}

// AppendRequest appends to b the ExportTraceServiceRequest of spans, all
// of res, in binary protobuf, the body of an OTLP/HTTP export: one
// ResourceSpans with res's attributes, one ScopeSpans in it with the
// scope's name and version (none when both are empty), and the spans
// (appendSpan). A nil span is left out; no span is an empty request.
func AppendRequest(b []byte, res Resource, spans []*tracing.Record) []byte {
	if !slices.ContainsFunc(spans, func(s *tracing.Record) bool { return s != nil }) {
		return b
	}
	var rs int
	b, rs = openMessage(b, requestResourceSpans)
	var r int
	b, r = openMessage(b, resourceSpansResource)
	b = appendKeyValues(b, resourceAttributes, res.Attributes)
	b = closeMessage(b, r)
	var ss int
	b, ss = openMessage(b, resourceSpansScopeSpans)
	if res.ScopeName != "" || res.ScopeVersion != "" {
		var sc int
		b, sc = openMessage(b, scopeSpansScope)
		b = appendString(b, scopeName, res.ScopeName)
		b = appendString(b, scopeVersion, res.ScopeVersion)
		b = closeMessage(b, sc)
	}
	for _, s := range spans {
		if s != nil {
			b = appendSpan(b, scopeSpansSpans, s)
		}
	}
	b = closeMessage(b, ss)
	return closeMessage(b, rs)
}
