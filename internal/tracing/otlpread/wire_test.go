package otlpread

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// msg builds a protobuf message by hand, field by field.
type msg []byte

func (m msg) bytes(num protowire.Number, b []byte) msg {
	m = protowire.AppendTag(m, num, protowire.BytesType)
	return protowire.AppendBytes(m, b)
}

func (m msg) str(num protowire.Number, s string) msg { return m.bytes(num, []byte(s)) }

func (m msg) varint(num protowire.Number, v uint64) msg {
	m = protowire.AppendTag(m, num, protowire.VarintType)
	return protowire.AppendVarint(m, v)
}

func (m msg) fixed64(num protowire.Number, v uint64) msg {
	m = protowire.AppendTag(m, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(m, v)
}

func (m msg) fixed32(num protowire.Number, v uint32) msg {
	m = protowire.AppendTag(m, num, protowire.Fixed32Type)
	return protowire.AppendFixed32(m, v)
}

// attr returns a KeyValue message of key and the AnyValue value.
func attr(key string, value msg) msg { return msg{}.str(1, key).bytes(2, value) }

func strValue(s string) msg { return msg{}.str(1, s) }
func boolValue(b bool) msg {
	v := uint64(0)
	if b {
		v = 1
	}
	return msg{}.varint(2, v)
}
func intValue(i int64) msg      { return msg{}.varint(3, uint64(i)) }
func doubleValue(f float64) msg { return msg{}.fixed64(4, math.Float64bits(f)) }
func bytesValue(b []byte) msg   { return msg{}.bytes(7, b) }
func arrayValue(vs ...msg) msg {
	var arr msg
	for _, v := range vs {
		arr = arr.bytes(1, v)
	}
	return msg{}.bytes(5, arr)
}
func kvlistValue(kvs ...msg) msg {
	var l msg
	for _, kv := range kvs {
		l = l.bytes(1, kv)
	}
	return msg{}.bytes(6, l)
}

func id16(b byte) []byte { return []byte{b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} }
func id8(b byte) []byte  { return binary.BigEndian.AppendUint64(nil, uint64(b)<<56|0x0102030405) }

// span builds a Span message: name, trace id byte t, span id byte s,
// parent byte p (0 for none), start and end, then the extra fields.
func span(name string, t, s, p byte, start, end uint64, extra ...msg) msg {
	m := msg{}.bytes(1, id16(t)).bytes(2, id8(s))
	if p != 0 {
		m = m.bytes(4, id8(p))
	}
	m = m.str(5, name).varint(6, 2).fixed64(7, start).fixed64(8, end)
	for _, e := range extra {
		m = append(m, e...)
	}
	return m
}

// request builds an ExportTraceServiceRequest of one resource with
// resource attributes res and one scope holding spans.
func request(res []msg, scope string, spans ...msg) msg {
	var resource msg
	for _, a := range res {
		resource = resource.bytes(1, a)
	}
	ss := msg{}.bytes(1, msg{}.str(1, scope).str(2, "1.0"))
	for _, s := range spans {
		ss = ss.bytes(2, s)
	}
	rs := msg{}.bytes(1, resource).bytes(2, ss)
	return msg{}.bytes(1, rs)
}
