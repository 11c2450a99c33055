package tracerecv

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// testSpan is a span of a hand-built export.
type testSpan struct {
	trace, id, parent byte // 0: no parent
	name              string
	start, end        uint64
	attrs             map[string]string // string attributes
	status            int               // 0 unset, 2 error
	message           string
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
}

func traceID(b byte) []byte { return []byte{b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1} }
func spanID(b byte) []byte  { return []byte{0, 0, 0, 0, 0, 0, 0, b} }

func keyValue(k, v string) []byte {
	return appendBytes(appendBytes(nil, 1, []byte(k)), 2, appendBytes(nil, 1, []byte(v)))
}

// export encodes an ExportTraceServiceRequest of one resource (service
// service) holding spans, with protowire.
func export(service string, spans ...testSpan) []byte {
	var ss []byte
	ss = appendBytes(ss, 1, appendBytes(nil, 1, []byte("test")))
	for _, s := range spans {
		var m []byte
		m = appendBytes(m, 1, traceID(s.trace))
		m = appendBytes(m, 2, spanID(s.id))
		if s.parent != 0 {
			m = appendBytes(m, 4, spanID(s.parent))
		}
		m = appendBytes(m, 5, []byte(s.name))
		m = protowire.AppendVarint(protowire.AppendTag(m, 6, protowire.VarintType), 2)
		m = protowire.AppendFixed64(protowire.AppendTag(m, 7, protowire.Fixed64Type), s.start)
		m = protowire.AppendFixed64(protowire.AppendTag(m, 8, protowire.Fixed64Type), s.end)
		for k, v := range s.attrs {
			m = appendBytes(m, 9, keyValue(k, v))
		}
		if s.status != 0 {
			st := appendBytes(nil, 2, []byte(s.message))
			st = protowire.AppendVarint(protowire.AppendTag(st, 3, protowire.VarintType), uint64(s.status))
			m = appendBytes(m, 15, st)
		}
		ss = appendBytes(ss, 2, m)
	}
	rs := appendBytes(nil, 1, appendBytes(nil, 1, keyValue("service.name", service)))
	rs = appendBytes(rs, 2, ss)
	return appendBytes(nil, 1, rs)
}
