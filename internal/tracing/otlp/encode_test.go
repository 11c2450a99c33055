package otlp_test

import (
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/carmyhq/carmy/internal/tracing/otlp"
)

// The ids, times and trace state of the spans the tests encode.
var (
	traceID  = trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	spanID   = trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	parentID = trace.SpanID{0x53, 0x99, 0x5c, 0x3f, 0x42, 0xcd, 0x8a, 0xd8}
	linkTID  = trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}
	linkSID  = trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31}
	start    = time.Unix(1_790_000_000, 123_456_789)
	end      = start.Add(1500 * time.Microsecond)
	state, _ = trace.ParseTraceState("carmy=1,vendor=x")
)

// everyAttribute is one attribute of each type an attribute.Value can
// hold, with its expected OTLP form.
func everyAttribute() ([]attribute.KeyValue, []*commonpb.KeyValue) {
	attrs := []attribute.KeyValue{
		attribute.String("carmy.tool", "order"),
		attribute.String("empty.string", ""),
		attribute.Bool("carmy.replayed", false),
		attribute.Bool("yes", true),
		attribute.Int64("int", -42),
		attribute.Int64("zero", 0),
		attribute.Float64("float", math.Pi),
		attribute.StringSlice("strings", []string{"a", ""}),
		attribute.BoolSlice("bools", []bool{true, false}),
		attribute.Int64Slice("ints", []int64{math.MinInt64, math.MaxInt64}),
		attribute.Float64Slice("floats", []float64{-0.5, 1e300}),
		attribute.ByteSlice("bytes", []byte{0, 1, 0xff}),
		attribute.Slice("mixed", attribute.StringValue("s"), attribute.IntValue(7)),
		attribute.Map("map", attribute.String("k", "v"), attribute.Bool("b", true)),
		{Key: "nothing"},
	}
	str := func(s string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	boo := func(b bool) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
	}
	in := func(i int64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: i}}
	}
	dbl := func(f float64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}
	}
	arr := func(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
	}
	want := []*commonpb.KeyValue{
		{Key: "carmy.tool", Value: str("order")},
		{Key: "empty.string", Value: str("")},
		{Key: "carmy.replayed", Value: boo(false)},
		{Key: "yes", Value: boo(true)},
		{Key: "int", Value: in(-42)},
		{Key: "zero", Value: in(0)},
		{Key: "float", Value: dbl(math.Pi)},
		{Key: "strings", Value: arr(str("a"), str(""))},
		{Key: "bools", Value: arr(boo(true), boo(false))},
		{Key: "ints", Value: arr(in(math.MinInt64), in(math.MaxInt64))},
		{Key: "floats", Value: arr(dbl(-0.5), dbl(1e300))},
		{Key: "bytes", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1, 0xff}}}},
		{Key: "mixed", Value: arr(str("s"), in(7))},
		{Key: "map", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{
			Values: []*commonpb.KeyValue{{Key: "b", Value: boo(true)}, {Key: "k", Value: str("v")}}}}}},
		{Key: "nothing", Value: &commonpb.AnyValue{}},
	}
	return attrs, want
}

// fullSpan is a span with every field set: a remote parent, trace state,
// attributes of each type, an event, a link, an error status and
// dropped counts; and its expected OTLP form.
func fullSpan(res *resource.Resource, scope instrumentation.Scope) (sdktrace.ReadOnlySpan, *tracepb.Span) {
	attrs, wantAttrs := everyAttribute()
	stub := tracetest.SpanStub{
		Name: "carmy.call",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, TraceState: state}),
		Parent: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: traceID, SpanID: parentID, TraceFlags: trace.FlagsSampled, Remote: true}),
		SpanKind:   trace.SpanKindServer,
		StartTime:  start,
		EndTime:    end,
		Attributes: attrs,
		Events: []sdktrace.Event{{Name: "retry", Time: start.Add(time.Microsecond),
			Attributes: []attribute.KeyValue{attribute.Int("attempt", 2)}, DroppedAttributeCount: 1}},
		Links: []sdktrace.Link{{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: linkTID, SpanID: linkSID, TraceState: state, Remote: true}),
			Attributes: []attribute.KeyValue{attribute.String("why", "batch")}, DroppedAttributeCount: 3}},
		Status:               sdktrace.Status{Code: codes.Error, Description: "the store failed"},
		DroppedAttributes:    4,
		DroppedEvents:        5,
		DroppedLinks:         6,
		Resource:             res,
		InstrumentationScope: scope,
	}
	want := &tracepb.Span{
		TraceId:           traceID[:],
		SpanId:            spanID[:],
		TraceState:        "carmy=1,vendor=x",
		ParentSpanId:      parentID[:],
		Flags:             0x01 | 0x100 | 0x200,
		Name:              "carmy.call",
		Kind:              tracepb.Span_SPAN_KIND_SERVER,
		StartTimeUnixNano: uint64(start.UnixNano()),
		EndTimeUnixNano:   uint64(end.UnixNano()),
		Attributes:        wantAttrs,
		Events: []*tracepb.Span_Event{{TimeUnixNano: uint64(start.Add(time.Microsecond).UnixNano()), Name: "retry",
			Attributes:             []*commonpb.KeyValue{{Key: "attempt", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 2}}}},
			DroppedAttributesCount: 1}},
		Links: []*tracepb.Span_Link{{TraceId: linkTID[:], SpanId: linkSID[:], TraceState: "carmy=1,vendor=x",
			Attributes:             []*commonpb.KeyValue{{Key: "why", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "batch"}}}},
			DroppedAttributesCount: 3, Flags: 0x100 | 0x200}},
		Status:                 &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "the store failed"},
		DroppedAttributesCount: 4,
		DroppedEventsCount:     5,
		DroppedLinksCount:      6,
	}
	return stub.Snapshot(), want
}

// rootSpan is a span with the fewest fields: no parent, internal, no
// attributes, an unset status; and its expected OTLP form.
func rootSpan(name string, res *resource.Resource, scope instrumentation.Scope) (sdktrace.ReadOnlySpan, *tracepb.Span) {
	stub := tracetest.SpanStub{
		Name:        name,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: linkTID, SpanID: linkSID}),
		SpanKind:    trace.SpanKindInternal,
		StartTime:   start, EndTime: start,
		Status:   sdktrace.Status{Code: codes.Ok},
		Resource: res, InstrumentationScope: scope,
	}
	return stub.Snapshot(), &tracepb.Span{
		TraceId: linkTID[:], SpanId: linkSID[:], Flags: 0x100, Name: name, Kind: tracepb.Span_SPAN_KIND_INTERNAL,
		StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.UnixNano()),
		Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK},
	}
}

// decode reads body with the generated OTLP types.
func decode(t *testing.T, body []byte) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	var got coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &got); err != nil {
		t.Fatalf("the generated OTLP types cannot read the export: %v", err)
	}
	return &got
}

func checkEqual(t *testing.T, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("the export, decoded:\n%s\nwant:\n%s", prototext.Format(got), prototext.Format(want))
	}
}

// TestRequestRoundTrips: what AppendRequest encodes, read back with the
// generated OTLP protobuf types, is every field of every span, grouped by
// resource then by instrumentation scope in the order they first come.
func TestRequestRoundTrips(t *testing.T) {
	node := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "carmy"), attribute.String("service.instance.id", "node-1"))
	other := resource.NewSchemaless(attribute.String("service.name", "other"))
	carmy := instrumentation.Scope{Name: "github.com/carmyhq/carmy", Version: "1.2.3",
		SchemaURL: "https://opentelemetry.io/schemas/1.25.0", Attributes: attribute.NewSet(attribute.Bool("scoped", true))}

	full, wantFull := fullSpan(node, carmy)
	first, wantFirst := rootSpan("carmy.reserve", node, carmy)
	unscoped, wantUnscoped := rootSpan("carmy.tool", node, instrumentation.Scope{})
	elsewhere, wantElsewhere := rootSpan("carmy.complete", other, carmy)
	again, wantAgain := rootSpan("carmy.forward", resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.instance.id", "node-1"), attribute.String("service.name", "carmy")), carmy)

	body := otlp.AppendRequest(nil, []sdktrace.ReadOnlySpan{first, unscoped, elsewhere, nil, full, again})

	scope := &commonpb.InstrumentationScope{Name: "github.com/carmyhq/carmy", Version: "1.2.3",
		Attributes: []*commonpb.KeyValue{{Key: "scoped", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}}}}
	str := func(s string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	want := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{
			Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
				{Key: "service.instance.id", Value: str("node-1")}, {Key: "service.name", Value: str("carmy")}}},
			ScopeSpans: []*tracepb.ScopeSpans{
				{Scope: scope, Spans: []*tracepb.Span{wantFirst, wantFull, wantAgain}, SchemaUrl: "https://opentelemetry.io/schemas/1.25.0"},
				{Spans: []*tracepb.Span{wantUnscoped}},
			},
			SchemaUrl: "https://opentelemetry.io/schemas/1.26.0",
		},
		{
			Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: str("other")}}},
			ScopeSpans: []*tracepb.ScopeSpans{{Scope: scope, Spans: []*tracepb.Span{wantElsewhere}, SchemaUrl: "https://opentelemetry.io/schemas/1.25.0"}},
		},
	}}
	checkEqual(t, decode(t, body), want)

	if got := otlp.AppendRequest(nil, nil); len(got) != 0 {
		t.Errorf("no spans: %x, want an empty request", got)
	}
}

// TestSpanOfRecordedTimes: a span from a real tracer provider (times the
// SDK took, ids it made) keeps them through the encoding.
func TestSpanOfRecordedTimes(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, span := tp.Tracer("t").Start(t.Context(), "carmy.reserve")
	span.SetAttributes(attribute.String("carmy.outcome", "reserved"))
	span.End()
	s := rec.Ended()[0]
	got := decode(t, otlp.AppendRequest(nil, rec.Ended())).ResourceSpans[0].ScopeSpans[0].Spans[0]
	tid, sid := s.SpanContext().TraceID(), s.SpanContext().SpanID()
	if string(got.TraceId) != string(tid[:]) || string(got.SpanId) != string(sid[:]) || len(got.ParentSpanId) != 0 ||
		got.StartTimeUnixNano != uint64(s.StartTime().UnixNano()) || got.EndTimeUnixNano != uint64(s.EndTime().UnixNano()) ||
		got.Flags != 0x101 || got.Kind != tracepb.Span_SPAN_KIND_INTERNAL || got.Attributes[0].Value.GetStringValue() != "reserved" {
		t.Errorf("decoded %s, want the span %v", prototext.Format(got), s)
	}
}

// TestLargeRequestRoundTrips: a batch whose messages need lengths of
// three varint bytes (over 16 KiB) reads back span for span.
func TestLargeRequestRoundTrips(t *testing.T) {
	res := resource.NewSchemaless(attribute.String("service.name", "carmy"))
	var spans []sdktrace.ReadOnlySpan
	var want []*tracepb.Span
	for range 512 {
		s, w := fullSpan(res, instrumentation.Scope{Name: "carmy"})
		spans, want = append(spans, s), append(want, w)
	}
	body := otlp.AppendRequest(nil, spans)
	if len(body) < 1<<17 {
		t.Fatalf("%d bytes: not large enough to test long lengths", len(body))
	}
	got := decode(t, body).ResourceSpans[0].ScopeSpans[0].Spans
	if len(got) != len(want) {
		t.Fatalf("%d spans read back, want %d", len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("span %d differs:\n%s", i, prototext.Format(got[i]))
		}
	}
}

// BenchmarkAppendRequest measures the encoding of a batch of 512 spans
// like a call's span (six attributes), into a reused buffer.
func BenchmarkAppendRequest(b *testing.B) {
	res := resource.NewSchemaless(attribute.String("service.name", "carmy"))
	spans := make([]sdktrace.ReadOnlySpan, 512)
	for i := range spans {
		stub := tracetest.SpanStub{Name: "carmy.call", SpanKind: trace.SpanKindServer, StartTime: start, EndTime: end,
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}),
			Attributes: []attribute.KeyValue{attribute.String("carmy.tool", "order"), attribute.String("carmy.outcome", "ran"),
				attribute.Bool("carmy.replayed", false), attribute.String("carmy.execution_id", "0194f3a2-7c1e-7b1a-9d2e-3c4b5a6f7e8d"),
				attribute.String("carmy.principal", "alice"), attribute.String("carmy.transport", "http")},
			Resource: res, InstrumentationScope: instrumentation.Scope{Name: "github.com/carmyhq/carmy"}}
		spans[i] = stub.Snapshot()
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = otlp.AppendRequest(buf[:0], spans)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
	b.SetBytes(int64(len(buf)))
}
