package otlp

import (
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of ExportTraceServiceRequest
// (opentelemetry.proto.collector.trace.v1), ResourceSpans, ScopeSpans
// (opentelemetry.proto.trace.v1), Resource (resource.v1) and
// InstrumentationScope (common.v1).
const (
	requestResourceSpans protowire.Number = 1

	resourceSpansResource   protowire.Number = 1
	resourceSpansScopeSpans protowire.Number = 2
	resourceSpansSchemaURL  protowire.Number = 3

	scopeSpansScope     protowire.Number = 1
	scopeSpansSpans     protowire.Number = 2
	scopeSpansSchemaURL protowire.Number = 3

	resourceAttributes protowire.Number = 1

	scopeName       protowire.Number = 1
	scopeVersion    protowire.Number = 2
	scopeAttributes protowire.Number = 3
)

// resourceGroup is the spans of one resource, by instrumentation scope.
type resourceGroup struct {
	res    *resource.Resource
	scopes []scopeGroup
}

// scopeGroup is the spans of one instrumentation scope.
type scopeGroup struct {
	scope instrumentation.Scope
	spans []sdktrace.ReadOnlySpan
}

// group sorts spans into one group per resource (resources that are
// equivalent are one), and in each, one per instrumentation scope, in
// the order they first appear. A nil span is left out.
func group(spans []sdktrace.ReadOnlySpan) []resourceGroup {
	var groups []resourceGroup
	for _, s := range spans {
		if s == nil {
			continue
		}
		res, scope := s.Resource(), s.InstrumentationScope()
		r := 0
		for r < len(groups) && groups[r].res.Equivalent() != res.Equivalent() {
			r++
		}
		if r == len(groups) {
			groups = append(groups, resourceGroup{res: res})
		}
		g := &groups[r]
		i := 0
		for i < len(g.scopes) && g.scopes[i].scope != scope {
			i++
		}
		if i == len(g.scopes) {
			g.scopes = append(g.scopes, scopeGroup{scope: scope})
		}
		g.scopes[i].spans = append(g.scopes[i].spans, s)
	}
	return groups
}

// AppendRequest appends to b the ExportTraceServiceRequest of spans in
// binary protobuf, the body of an OTLP/HTTP export: one ResourceSpans
// per resource, one ScopeSpans per instrumentation scope in it (with
// the scope's name, version and attributes, none for the zero scope),
// the schema URLs of both, and the spans (appendSpan).
func AppendRequest(b []byte, spans []sdktrace.ReadOnlySpan) []byte {
	for _, g := range group(spans) {
		var rs int
		b, rs = openMessage(b, requestResourceSpans)
		if g.res != nil {
			var r int
			b, r = openMessage(b, resourceSpansResource)
			for it := g.res.Iter(); it.Next(); {
				b = appendKeyValue(b, resourceAttributes, it.Attribute())
			}
			b = closeMessage(b, r)
		}
		for _, sg := range g.scopes {
			var ss int
			b, ss = openMessage(b, resourceSpansScopeSpans)
			if sg.scope != (instrumentation.Scope{}) {
				var sc int
				b, sc = openMessage(b, scopeSpansScope)
				b = appendString(b, scopeName, sg.scope.Name)
				b = appendString(b, scopeVersion, sg.scope.Version)
				b = appendAttributeSet(b, scopeAttributes, &sg.scope.Attributes)
				b = closeMessage(b, sc)
			}
			for _, s := range sg.spans {
				b = appendSpan(b, scopeSpansSpans, s)
			}
			b = appendString(b, scopeSpansSchemaURL, sg.scope.SchemaURL)
			b = closeMessage(b, ss)
		}
		b = appendString(b, resourceSpansSchemaURL, g.res.SchemaURL())
		b = closeMessage(b, rs)
	}
	return b
}
