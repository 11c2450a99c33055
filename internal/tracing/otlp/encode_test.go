package otlp_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/carmyhq/carmy/internal/tracing"
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
// attributes of each type and an error status; and its expected OTLP
// form.
func fullSpan() (*tracing.Record, *tracepb.Span) {
	attrs, wantAttrs := everyAttribute()
	rec := &tracing.Record{
		Name: "carmy.call",
		Context: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled, TraceState: state}),
		Parent:        parentID,
		ParentRemote:  true,
		Kind:          trace.SpanKindServer,
		Start:         start,
		End:           end,
		Attributes:    attrs,
		StatusCode:    codes.Error,
		StatusMessage: "the store failed",
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
		Status:            &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "the store failed"},
	}
	return rec, want
}

// rootSpan is a span with the fewest fields: no parent, internal, no
// attributes, an ok status (its message left out); and its expected OTLP
// form.
func rootSpan(name string) (*tracing.Record, *tracepb.Span) {
	return &tracing.Record{
			Name:    name,
			Context: trace.NewSpanContext(trace.SpanContextConfig{TraceID: linkTID, SpanID: linkSID}),
			Kind:    trace.SpanKindInternal,
			Start:   start, End: start,
			StatusCode: codes.Ok, StatusMessage: "not sent",
		}, &tracepb.Span{
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
// generated OTLP protobuf types, is the resource, the scope and every
// field of every span, in order.
func TestRequestRoundTrips(t *testing.T) {
	res := otlp.Resource{ScopeName: "github.com/carmyhq/carmy", ScopeVersion: "1.2.3",
		Attributes: []attribute.KeyValue{attribute.String("service.instance.id", "node-1"), attribute.String("service.name", "carmy")}}
	full, wantFull := fullSpan()
	first, wantFirst := rootSpan("carmy.reserve")
	last, wantLast := rootSpan("carmy.forward")

	body := otlp.AppendRequest(nil, res, []*tracing.Record{first, nil, full, last})

	str := func(s string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	want := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
			{Key: "service.instance.id", Value: str("node-1")}, {Key: "service.name", Value: str("carmy")}}},
		ScopeSpans: []*tracepb.ScopeSpans{{
			Scope: &commonpb.InstrumentationScope{Name: "github.com/carmyhq/carmy", Version: "1.2.3"},
			Spans: []*tracepb.Span{wantFirst, wantFull, wantLast}}},
	}}}
	checkEqual(t, decode(t, body), want)

	unscoped := decode(t, otlp.AppendRequest(nil, otlp.Resource{}, []*tracing.Record{first}))
	if ss := unscoped.ResourceSpans[0].ScopeSpans[0]; ss.Scope != nil || len(ss.Spans) != 1 {
		t.Errorf("no scope: %s", prototext.Format(unscoped))
	}
	if got := otlp.AppendRequest(nil, res, nil); len(got) != 0 {
		t.Errorf("no spans: %x, want an empty request", got)
	}
	if got := otlp.AppendRequest(nil, res, []*tracing.Record{nil}); len(got) != 0 {
		t.Errorf("only a nil span: %x, want an empty request", got)
	}
}

// capture is a tracing.Exporter that keeps the records it is given.
type capture struct {
	mu   sync.Mutex
	recs []*tracing.Record
}

func (c *capture) Export(_ context.Context, spans []*tracing.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range spans {
		r := *s
		c.recs = append(c.recs, &r)
	}
	return nil
}

// TestSpanOfRecordedTimes: a span from a real provider (times it took,
// ids it made) keeps them through the encoding.
func TestSpanOfRecordedTimes(t *testing.T) {
	c := &capture{}
	p := tracing.NewProvider(c, tracing.Options{})
	tracing.Use(p)
	_, span := tracing.Start(t.Context(), tracing.SpanReserve)
	tracing.End(span, tracing.AttrOutcome, "reserved", nil)
	tracing.Use(nil)
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := c.recs[0]
	got := decode(t, otlp.AppendRequest(nil, otlp.Resource{}, c.recs)).ResourceSpans[0].ScopeSpans[0].Spans[0]
	tid, sid := s.Context.TraceID(), s.Context.SpanID()
	if string(got.TraceId) != string(tid[:]) || string(got.SpanId) != string(sid[:]) || len(got.ParentSpanId) != 0 ||
		got.StartTimeUnixNano != uint64(s.Start.UnixNano()) || got.EndTimeUnixNano != uint64(s.End.UnixNano()) ||
		got.Flags != 0x101 || got.Kind != tracepb.Span_SPAN_KIND_INTERNAL || got.Attributes[0].Value.GetStringValue() != "reserved" {
		t.Errorf("decoded %s, want the span %v", prototext.Format(got), s)
	}
}

// TestLargeRequestRoundTrips: a batch whose messages need lengths of
// three varint bytes (over 16 KiB) reads back span for span.
func TestLargeRequestRoundTrips(t *testing.T) {
	var spans []*tracing.Record
	var want []*tracepb.Span
	for range 512 {
		s, w := fullSpan()
		spans, want = append(spans, s), append(want, w)
	}
	body := otlp.AppendRequest(nil, otlp.Resource{ScopeName: "carmy"}, spans)
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
	res := otlp.Resource{Attributes: []attribute.KeyValue{attribute.String("service.name", "carmy")}, ScopeName: "github.com/carmyhq/carmy"}
	spans := make([]*tracing.Record, 512)
	for i := range spans {
		spans[i] = &tracing.Record{Name: "carmy.call", Kind: trace.SpanKindServer, Start: start, End: end,
			Context: trace.NewSpanContext(trace.SpanContextConfig{TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled}),
			Attributes: []attribute.KeyValue{attribute.String("carmy.tool", "order"), attribute.String("carmy.outcome", "ran"),
				attribute.Bool("carmy.replayed", false), attribute.String("carmy.execution_id", "0194f3a2-7c1e-7b1a-9d2e-3c4b5a6f7e8d"),
				attribute.String("carmy.principal", "alice"), attribute.String("carmy.transport", "http")}}
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = otlp.AppendRequest(buf[:0], res, spans)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(spans)), "ns/span")
	b.SetBytes(int64(len(buf)))
}
