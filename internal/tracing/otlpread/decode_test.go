package otlpread

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestDecodeReadsEveryField(t *testing.T) {
	call := span("carmy.call", 0xaa, 1, 0, 1000, 5000,
		msg{}.bytes(9, attr("carmy.tool", strValue("echo"))),
		msg{}.bytes(9, attr("carmy.replayed", boolValue(true))),
		msg{}.bytes(9, attr("n", intValue(-42))),
		msg{}.bytes(9, attr("ratio", doubleValue(0.5))),
		msg{}.bytes(9, attr("list", arrayValue(strValue("a"), intValue(2)))),
		msg{}.bytes(9, attr("map", kvlistValue(attr("k", boolValue(false))))),
		msg{}.bytes(9, attr("raw", bytesValue([]byte{0xca, 0xfe}))),
		msg{}.bytes(11, msg{}.fixed64(1, 3000).str(2, "retry").bytes(3, attr("attempt", intValue(2)))),
		msg{}.bytes(15, msg{}.str(2, "store down").varint(3, 2)),
		msg{}.str(3, "k=v"),
		msg{}.fixed32(16, 0x101),              // flags: not read
		msg{}.varint(99, 7),                   // a field of a later version
		msg{}.bytes(13, msg{}.str(1, "link")), // links: skipped
	)
	child := span("carmy.reserve", 0xaa, 2, 1, 2000, 3000)
	req, err := Decode(request([]msg{attr("service.name", strValue("carmy"))}, "carmy", call, child))
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Resources) != 1 || len(req.Resources[0].Scopes) != 1 || req.SpanCount() != 2 {
		t.Fatalf("decoded %+v, want one resource, one scope, two spans", req)
	}
	rs := req.Resources[0]
	if v, ok := Lookup(rs.Attributes, "service.name"); !ok || v.String() != "carmy" {
		t.Errorf("service.name = %v %v, want carmy", v, ok)
	}
	if sc := rs.Scopes[0].Scope; sc.Name != "carmy" || sc.Version != "1.0" {
		t.Errorf("scope %+v, want carmy 1.0", sc)
	}
	s := rs.Scopes[0].Spans[0]
	if s.Name != "carmy.call" || s.TraceID.String() != "aa0102030405060708090a0b0c0d0e0f" || s.SpanID.String() != "0100000102030405" ||
		!s.ParentSpanID.IsZero() || s.Kind != KindServer || s.StartUnixNano != 1000 || s.EndUnixNano != 5000 || s.TraceState != "k=v" {
		t.Errorf("span %+v", s)
	}
	for key, want := range map[string]string{
		"carmy.tool": "echo", "carmy.replayed": "true", "n": "-42", "ratio": "0.5",
		"list": "[a, 2]", "map": "{k: false}", "raw": "cafe",
	} {
		if v, ok := s.Attr(key); !ok || v.String() != want {
			t.Errorf("attribute %s = %q (%v), want %q", key, v.String(), ok, want)
		}
	}
	if v, _ := s.Attr("n"); v.Kind != ValueInt || v.Int != -42 {
		t.Errorf("n = %+v, want the int -42", v)
	}
	if len(s.Events) != 1 || s.Events[0].Name != "retry" || s.Events[0].TimeUnixNano != 3000 || len(s.Events[0].Attributes) != 1 {
		t.Errorf("events %+v", s.Events)
	}
	if s.Status != (Status{Code: StatusError, Message: "store down"}) {
		t.Errorf("status %+v, want error 'store down'", s.Status)
	}
	c := rs.Scopes[0].Spans[1]
	if c.ParentSpanID != s.SpanID || c.Status.Code != StatusUnset {
		t.Errorf("child %+v: want parent %s, status unset", c, s.SpanID)
	}
}

func TestDecodeEmptyRequest(t *testing.T) {
	req, err := Decode(nil)
	if err != nil || req.SpanCount() != 0 {
		t.Fatalf("Decode(nil) = %+v, %v; want an empty request", req, err)
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	good := request(nil, "s", span("a", 1, 1, 0, 1, 2))
	deep := strValue("x")
	for range maxValueNesting + 1 {
		deep = arrayValue(deep)
	}
	for _, tt := range []struct {
		name string
		in   []byte
		want string
	}{
		{"truncated", good[:len(good)-3], "field 1"},
		{"a bad tag", []byte{0x00}, "tag"},
		{"resource_spans as a varint", msg{}.varint(1, 3), "wire type"},
		{"a short trace id", request(nil, "s", msg{}.bytes(1, []byte{1, 2}).bytes(2, id8(1))), "trace_id of 2 bytes"},
		{"no span id", request(nil, "s", msg{}.bytes(1, id16(1))), "no span_id"},
		{"an all-zero trace id", request(nil, "s", msg{}.bytes(1, make([]byte, 16)).bytes(2, id8(1))), "no trace_id"},
		{"a parent id of 3 bytes", request(nil, "s", span("a", 1, 1, 0, 1, 2, msg{}.bytes(4, []byte{1, 2, 3}))), "parent_span_id of 3"},
		{"the start as a varint", request(nil, "s", msg{}.bytes(1, id16(1)).bytes(2, id8(1)).varint(7, 5)), "wire type"},
		{"a status code as bytes", request(nil, "s", span("a", 1, 1, 0, 1, 2, msg{}.bytes(15, msg{}.str(3, "x")))), "status"},
		{"values nested too deep", request(nil, "s", span("a", 1, 1, 0, 1, 2, msg{}.bytes(9, attr("d", deep)))), "nested"},
		{"a truncated attribute", request(nil, "s", span("a", 1, 1, 0, 1, 2, msg{}.bytes(9, attr("k", strValue("v"))[:5]))), "attribute"},
	} {
		req, err := Decode(tt.in)
		if err == nil || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Decode = %+v, %v; want an ErrMalformed naming %q", tt.name, req, err, tt.want)
		}
	}
}

func TestEncodeResponse(t *testing.T) {
	if b := EncodeResponse(0, ""); len(b) != 0 {
		t.Errorf("full success: %x, want empty", b)
	}
	b := EncodeResponse(3, "too old")
	partial, n := protowire.ConsumeBytes(b[1:])
	if b[0] != 0x0a || n != len(b)-1 {
		t.Fatalf("partial success: %x", b)
	}
	want := msg{}.varint(1, 3).str(2, "too old")
	if string(partial) != string(want) {
		t.Errorf("partial_success %x, want %x", partial, want)
	}
}

func TestEncodeResponseJSON(t *testing.T) {
	if got := string(EncodeResponseJSON(0, "")); got != "{}" {
		t.Errorf("full success: %s, want {}", got)
	}
	if got, want := string(EncodeResponseJSON(3, "too old")), `{"partialSuccess":{"rejectedSpans":"3","errorMessage":"too old"}}`; got != want {
		t.Errorf("partial success: %s, want %s", got, want)
	}
}
