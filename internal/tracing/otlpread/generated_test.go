package otlpread

import (
	"bytes"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// generatedRequest is a request made with OpenTelemetry's generated
// code (only this test links it).
func generatedRequest() *coltracepb.ExportTraceServiceRequest {
	str := func(s string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "service.name", Value: str("carmy")}}},
		ScopeSpans: []*tracepb.ScopeSpans{{
			Scope: &commonpb.InstrumentationScope{Name: "github.com/carmyhq/carmy", Version: "v1"},
			Spans: []*tracepb.Span{{
				TraceId: bytes.Repeat([]byte{0x4b}, 16), SpanId: bytes.Repeat([]byte{1}, 8), ParentSpanId: bytes.Repeat([]byte{2}, 8),
				Name: "carmy.call", Kind: tracepb.Span_SPAN_KIND_SERVER, StartTimeUnixNano: 1e18, EndTimeUnixNano: 1e18 + 2500,
				Flags: 0x301,
				Attributes: []*commonpb.KeyValue{
					{Key: "carmy.tool", Value: str("echo")},
					{Key: "carmy.replayed", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: false}}},
					{Key: "count", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 1 << 40}}},
					{Key: "ratio", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.25}}},
					{Key: "tags", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{
						Values: []*commonpb.AnyValue{str("a"), str("b")}}}}},
				},
				Events: []*tracepb.Span_Event{{TimeUnixNano: 1e18 + 10, Name: "started"}},
				Links:  []*tracepb.Span_Link{{TraceId: bytes.Repeat([]byte{9}, 16), SpanId: bytes.Repeat([]byte{9}, 8)}},
				Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "boom"},
			}},
		}},
	}}}
}

// TestDecodeAgreesWithGeneratedCode: what OpenTelemetry's own generated
// code encodes, Decode reads back field for field.
func TestDecodeAgreesWithGeneratedCode(t *testing.T) {
	raw, err := proto.Marshal(generatedRequest())
	if err != nil {
		t.Fatal(err)
	}
	req, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if req.SpanCount() != 1 {
		t.Fatalf("%d spans, want 1", req.SpanCount())
	}
	rs := req.Resources[0]
	s := rs.Scopes[0].Spans[0]
	if v, _ := Lookup(rs.Attributes, "service.name"); v.String() != "carmy" || rs.Scopes[0].Scope.Name != "github.com/carmyhq/carmy" {
		t.Errorf("resource %+v", rs)
	}
	if s.TraceID.String() != "4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b" || s.SpanID.String() != "0101010101010101" || s.ParentSpanID.String() != "0202020202020202" ||
		s.Name != "carmy.call" || s.Kind != KindServer || s.StartUnixNano != 1e18 || s.EndUnixNano != 1e18+2500 {
		t.Errorf("span %+v", s)
	}
	for key, want := range map[string]string{"carmy.tool": "echo", "carmy.replayed": "false", "count": "1099511627776", "ratio": "1.25", "tags": "[a, b]"} {
		if v, ok := s.Attr(key); !ok || v.String() != want {
			t.Errorf("attribute %s = %q, want %q", key, v.String(), want)
		}
	}
	if len(s.Events) != 1 || s.Events[0].Name != "started" || s.Status != (Status{StatusError, "boom"}) {
		t.Errorf("events %+v, status %+v", s.Events, s.Status)
	}
}

// FuzzDecode: no input panics Decode; an input Decode accepts is one the
// generated code accepts too (it is laxer: it keeps fields of a wrong
// wire type as unknown), with the same spans.
func FuzzDecode(f *testing.F) {
	good, _ := proto.Marshal(generatedRequest())
	f.Add(good)
	f.Add([]byte(request([]msg{attr("service.name", strValue("x"))}, "s", span("a", 1, 1, 2, 1, 2,
		msg{}.bytes(9, attr("l", arrayValue(kvlistValue(attr("k", intValue(1))))))))))
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x80})
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := Decode(in)
		if err != nil {
			return
		}
		var gen coltracepb.ExportTraceServiceRequest
		if proto.Unmarshal(in, &gen) != nil {
			return // e.g. a string that is not UTF-8, which Decode keeps as is
		}
		var ids []string
		for _, rs := range gen.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					ids = append(ids, string(s.TraceId)+string(s.SpanId)+s.Name)
				}
			}
		}
		i := 0
		for _, rs := range req.Resources {
			for _, ss := range rs.Scopes {
				for _, s := range ss.Spans {
					if i >= len(ids) || ids[i] != string(s.TraceID[:])+string(s.SpanID[:])+s.Name {
						t.Fatalf("span %d: Decode read %+v, the generated code %d spans", i, s, len(ids))
					}
					i++
				}
			}
		}
		if i != len(ids) {
			t.Fatalf("Decode read %d spans, the generated code %d", i, len(ids))
		}
	})
}
