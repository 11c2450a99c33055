package otlpread

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// TestDecodeJSONAgreesWithDecode: a request in OTLP/JSON, as the
// generated code's JSON mapping writes it, reads as the same request in
// protobuf does.
func TestDecodeJSONAgreesWithDecode(t *testing.T) {
	gen := generatedRequest()
	raw, err := proto.Marshal(gen)
	if err != nil {
		t.Fatal(err)
	}
	fromProto, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	js, err := protojson.Marshal(gen)
	if err != nil {
		t.Fatal(err)
	}
	// The JSON mapping of protobuf writes ids in base64; OTLP/JSON in hex.
	js = []byte(strings.NewReplacer(
		`"S0tLS0tLS0tLS0tLS0tLSw=="`, `"4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b"`,
		`"AQEBAQEBAQE="`, `"0101010101010101"`,
		`"AgICAgICAgI="`, `"0202020202020202"`,
		`"SPAN_KIND_SERVER"`, `2`, `"STATUS_CODE_ERROR"`, `2`,
	).Replace(string(js)))
	fromJSON, err := DecodeJSON(js)
	if err != nil {
		t.Fatalf("DecodeJSON: %v\n%s", err, js)
	}
	if !reflect.DeepEqual(fromJSON, fromProto) {
		t.Errorf("from JSON:\n%+v\nfrom protobuf:\n%+v", fromJSON, fromProto)
	}
}

func TestDecodeJSONReadsValues(t *testing.T) {
	req, err := DecodeJSON([]byte(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"carmy"}}]},
		"scopeSpans":[{"scope":{"name":"s"},"spans":[{"traceId":"4BF92F3577B34DA6A3CE929D0E0E4736","spanId":"00f067aa0ba902b7",
		"name":"carmy.call","kind":2,"startTimeUnixNano":"1000","endTimeUnixNano":2000,"unknown":{"x":1},
		"attributes":[{"key":"i","value":{"intValue":"-7"}},{"key":"d","value":{"doubleValue":"NaN"}},{"key":"b","value":{"bytesValue":"yv4="}},
		{"key":"l","value":{"kvlistValue":{"values":[{"key":"k","value":{"boolValue":true}}]}}}],
		"status":{"code":2,"message":"boom"}}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := req.Resources[0].Scopes[0].Spans[0]
	if s.TraceID.String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.StartUnixNano != 1000 || s.EndUnixNano != 2000 || s.Kind != KindServer ||
		s.Status != (Status{StatusError, "boom"}) {
		t.Errorf("span %+v", s)
	}
	for key, want := range map[string]string{"i": "-7", "d": "NaN", "b": "cafe", "l": "{k: true}"} {
		if v, _ := s.Attr(key); v.String() != want {
			t.Errorf("attribute %s = %q, want %q", key, v.String(), want)
		}
	}
}

func TestDecodeJSONRejectsMalformed(t *testing.T) {
	span := func(fields string) string {
		return `{"resourceSpans":[{"scopeSpans":[{"spans":[{` + fields + `}]}]}]}`
	}
	deep := `{"stringValue":"x"}`
	for range maxValueNesting + 1 {
		deep = `{"arrayValue":{"values":[` + deep + `]}}`
	}
	for _, tt := range []struct{ name, in, want string }{
		{"not JSON", `{"resourceSpans":`, "unexpected EOF"},
		{"two objects", `{} {}`, "after the JSON object"},
		{"a base64 trace id", span(`"traceId":"S0tLS0tLS0tLS0tLS0tLSw==","spanId":"0101010101010101"`), "traceId of 24 hex digits"},
		{"no span id", span(`"traceId":"4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b"`), "no spanId"},
		{"a bad parent", span(`"traceId":"4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b","spanId":"0101010101010101","parentSpanId":"zz"`), "parentSpanId"},
		{"a bad time", span(`"traceId":"4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b","spanId":"0101010101010101","startTimeUnixNano":"soon"`), "unsigned 64-bit"},
		{"too deep", span(`"traceId":"4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b","spanId":"0101010101010101","attributes":[{"key":"d","value":` + deep + `}]`), "nested"},
	} {
		req, err := DecodeJSON([]byte(tt.in))
		if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: DecodeJSON = %+v, %v; want an ErrMalformed saying %q", tt.name, req, err, tt.want)
		}
	}
}

// FuzzDecodeJSON: no input panics DecodeJSON.
func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b4b","spanId":"0101010101010101",` +
		`"attributes":[{"key":"a","value":{"arrayValue":{"values":[{"intValue":1},{"doubleValue":"Infinity"}]}}}]}]}]}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		if req, err := DecodeJSON(in); err == nil && req == nil {
			t.Fatal("nil request without an error")
		}
	})
}
