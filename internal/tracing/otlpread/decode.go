package otlpread

import (
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the OTLP messages read here
// (opentelemetry/proto/{collector/trace,trace,common,resource}/v1).
const (
	requestResourceSpans protowire.Number = 1

	resourceSpansResource   protowire.Number = 1
	resourceSpansScopeSpans protowire.Number = 2
	resourceAttributes      protowire.Number = 1

	scopeSpansScope  protowire.Number = 1
	scopeSpansSpans  protowire.Number = 2
	scopeName        protowire.Number = 1
	scopeVersion     protowire.Number = 2
	spanTraceID      protowire.Number = 1
	spanSpanID       protowire.Number = 2
	spanTraceState   protowire.Number = 3
	spanParentSpanID protowire.Number = 4
	spanName         protowire.Number = 5
	spanKind         protowire.Number = 6
	spanStart        protowire.Number = 7
	spanEnd          protowire.Number = 8
	spanAttributes   protowire.Number = 9
	spanEvents       protowire.Number = 11
	spanStatus       protowire.Number = 15
	eventTime        protowire.Number = 1
	eventName        protowire.Number = 2
	eventAttributes  protowire.Number = 3
	statusMessage    protowire.Number = 2
	statusCode       protowire.Number = 3
	keyValueKey      protowire.Number = 1
	keyValueValue    protowire.Number = 2
	anyString        protowire.Number = 1
	anyBool          protowire.Number = 2
	anyInt           protowire.Number = 3
	anyDouble        protowire.Number = 4
	anyArray         protowire.Number = 5
	anyKVList        protowire.Number = 6
	anyBytes         protowire.Number = 7
	arrayValues      protowire.Number = 1
	kvListValues     protowire.Number = 1
	responsePartial  protowire.Number = 1
	partialRejected  protowire.Number = 1
	partialMessage   protowire.Number = 2
	maxValueNesting                   = 32
	wantBytes                         = protowire.BytesType
	wantVarint                        = protowire.VarintType
	wantFixed64                       = protowire.Fixed64Type
)

// ErrMalformed is wrapped by every error of Decode.
var ErrMalformed = errors.New("malformed OTLP trace export")

// field is one field of a message: its number and wire type, and its
// value (u for varint and fixed types, b for length-delimited ones).
type field struct {
	num protowire.Number
	typ protowire.Type
	u   uint64
	b   []byte
}

// fields calls fn with each field of message b, in order; it stops at
// the first error, its own or fn's. Groups are skipped whole.
func fields(b []byte, fn func(f field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("a field's tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.u, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			f.u = uint64(v)
		case protowire.Fixed64Type:
			f.u, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// expect returns an error unless f has wire type typ; msg names f's
// message.
func (f field) expect(msg string, typ protowire.Type) error {
	if f.typ != typ {
		return fmt.Errorf("%s field %d has wire type %d, want %d", msg, f.num, f.typ, typ)
	}
	return nil
}

// Decode reads an ExportTraceServiceRequest in binary protobuf. Its error
// wraps ErrMalformed and says which message and field is wrong.
func Decode(b []byte) (*Request, error) {
	req := &Request{}
	err := fields(b, func(f field) error {
		if f.num != requestResourceSpans {
			return nil
		}
		if err := f.expect("ExportTraceServiceRequest", wantBytes); err != nil {
			return err
		}
		rs, err := decodeResourceSpans(f.b)
		if err != nil {
			return fmt.Errorf("resource_spans %d: %w", len(req.Resources), err)
		}
		req.Resources = append(req.Resources, rs)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return req, nil
}

func decodeResourceSpans(b []byte) (ResourceSpans, error) {
	var rs ResourceSpans
	err := fields(b, func(f field) error {
		switch f.num {
		case resourceSpansResource:
			if err := f.expect("ResourceSpans", wantBytes); err != nil {
				return err
			}
			return fields(f.b, func(f field) error {
				if f.num != resourceAttributes {
					return nil
				}
				if err := f.expect("Resource", wantBytes); err != nil {
					return err
				}
				kv, err := decodeKeyValue(f.b, 0)
				if err != nil {
					return fmt.Errorf("resource attribute: %w", err)
				}
				rs.Attributes = append(rs.Attributes, kv)
				return nil
			})
		case resourceSpansScopeSpans:
			if err := f.expect("ResourceSpans", wantBytes); err != nil {
				return err
			}
			ss, err := decodeScopeSpans(f.b)
			if err != nil {
				return fmt.Errorf("scope_spans %d: %w", len(rs.Scopes), err)
			}
			rs.Scopes = append(rs.Scopes, ss)
		}
		return nil
	})
	return rs, err
}

func decodeScopeSpans(b []byte) (ScopeSpans, error) {
	var ss ScopeSpans
	err := fields(b, func(f field) error {
		switch f.num {
		case scopeSpansScope:
			if err := f.expect("ScopeSpans", wantBytes); err != nil {
				return err
			}
			return fields(f.b, func(f field) error {
				switch f.num {
				case scopeName, scopeVersion:
					if err := f.expect("InstrumentationScope", wantBytes); err != nil {
						return err
					}
					if f.num == scopeName {
						ss.Scope.Name = string(f.b)
					} else {
						ss.Scope.Version = string(f.b)
					}
				}
				return nil
			})
		case scopeSpansSpans:
			if err := f.expect("ScopeSpans", wantBytes); err != nil {
				return err
			}
			s, err := decodeSpan(f.b)
			if err != nil {
				return fmt.Errorf("span %d: %w", len(ss.Spans), err)
			}
			ss.Spans = append(ss.Spans, s)
		}
		return nil
	})
	return ss, err
}

func decodeSpan(b []byte) (Span, error) {
	var s Span
	var haveTrace, haveSpan bool
	err := fields(b, func(f field) error {
		var want protowire.Type
		switch f.num {
		case spanTraceID, spanSpanID, spanTraceState, spanParentSpanID, spanName, spanAttributes, spanEvents, spanStatus:
			want = wantBytes
		case spanKind:
			want = wantVarint
		case spanStart, spanEnd:
			want = wantFixed64
		default:
			return nil
		}
		if err := f.expect("Span", want); err != nil {
			return err
		}
		switch f.num {
		case spanTraceID:
			if len(f.b) != len(s.TraceID) {
				return fmt.Errorf("trace_id of %d bytes, want %d", len(f.b), len(s.TraceID))
			}
			copy(s.TraceID[:], f.b)
			haveTrace = true
		case spanSpanID:
			if len(f.b) != len(s.SpanID) {
				return fmt.Errorf("span_id of %d bytes, want %d", len(f.b), len(s.SpanID))
			}
			copy(s.SpanID[:], f.b)
			haveSpan = true
		case spanParentSpanID:
			switch len(f.b) {
			case 0:
				s.ParentSpanID = SpanID{}
			case len(s.ParentSpanID):
				copy(s.ParentSpanID[:], f.b)
			default:
				return fmt.Errorf("parent_span_id of %d bytes, want %d or none", len(f.b), len(s.ParentSpanID))
			}
		case spanTraceState:
			s.TraceState = string(f.b)
		case spanName:
			s.Name = string(f.b)
		case spanKind:
			s.Kind = SpanKind(int32(f.u))
		case spanStart:
			s.StartUnixNano = f.u
		case spanEnd:
			s.EndUnixNano = f.u
		case spanAttributes:
			kv, err := decodeKeyValue(f.b, 0)
			if err != nil {
				return fmt.Errorf("attribute: %w", err)
			}
			s.Attributes = append(s.Attributes, kv)
		case spanEvents:
			e, err := decodeEvent(f.b)
			if err != nil {
				return fmt.Errorf("event %d: %w", len(s.Events), err)
			}
			s.Events = append(s.Events, e)
		case spanStatus:
			st, err := decodeStatus(f.b)
			if err != nil {
				return err
			}
			s.Status = st
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	if !haveTrace || s.TraceID == (TraceID{}) {
		return s, errors.New("no trace_id, or an all-zero one")
	}
	if !haveSpan || s.SpanID.IsZero() {
		return s, errors.New("no span_id, or an all-zero one")
	}
	return s, nil
}

func decodeEvent(b []byte) (Event, error) {
	var e Event
	err := fields(b, func(f field) error {
		switch f.num {
		case eventTime:
			if err := f.expect("Event", wantFixed64); err != nil {
				return err
			}
			e.TimeUnixNano = f.u
		case eventName:
			if err := f.expect("Event", wantBytes); err != nil {
				return err
			}
			e.Name = string(f.b)
		case eventAttributes:
			if err := f.expect("Event", wantBytes); err != nil {
				return err
			}
			kv, err := decodeKeyValue(f.b, 0)
			if err != nil {
				return fmt.Errorf("attribute: %w", err)
			}
			e.Attributes = append(e.Attributes, kv)
		}
		return nil
	})
	return e, err
}

func decodeStatus(b []byte) (Status, error) {
	var st Status
	err := fields(b, func(f field) error {
		switch f.num {
		case statusMessage:
			if err := f.expect("Status", wantBytes); err != nil {
				return err
			}
			st.Message = string(f.b)
		case statusCode:
			if err := f.expect("Status", wantVarint); err != nil {
				return err
			}
			st.Code = StatusCode(int32(f.u))
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("status: %w", err)
	}
	return st, nil
}

// decodeKeyValue reads a KeyValue whose value is nested depth values
// deep.
func decodeKeyValue(b []byte, depth int) (KeyValue, error) {
	var kv KeyValue
	err := fields(b, func(f field) error {
		switch f.num {
		case keyValueKey:
			if err := f.expect("KeyValue", wantBytes); err != nil {
				return err
			}
			kv.Key = string(f.b)
		case keyValueValue:
			if err := f.expect("KeyValue", wantBytes); err != nil {
				return err
			}
			v, err := decodeAnyValue(f.b, depth+1)
			if err != nil {
				return err
			}
			kv.Value = v
		}
		return nil
	})
	if err != nil && kv.Key != "" {
		return kv, fmt.Errorf("%q: %w", kv.Key, err)
	}
	return kv, err
}

// decodeAnyValue reads an AnyValue nested depth values deep (1 for an
// attribute's own value). Of a oneof given twice, the last wins, as
// protobuf merges it.
func decodeAnyValue(b []byte, depth int) (Value, error) {
	if depth > maxValueNesting {
		return Value{}, fmt.Errorf("values nested more than %d deep", maxValueNesting)
	}
	var v Value
	err := fields(b, func(f field) error {
		var want protowire.Type
		switch f.num {
		case anyString, anyArray, anyKVList, anyBytes:
			want = wantBytes
		case anyBool, anyInt:
			want = wantVarint
		case anyDouble:
			want = wantFixed64
		default:
			return nil
		}
		if err := f.expect("AnyValue", want); err != nil {
			return err
		}
		v = Value{}
		switch f.num {
		case anyString:
			v.Kind, v.Str = ValueString, string(f.b)
		case anyBool:
			v.Kind, v.Bool = ValueBool, f.u != 0
		case anyInt:
			v.Kind, v.Int = ValueInt, int64(f.u)
		case anyDouble:
			v.Kind, v.Double = ValueDouble, math.Float64frombits(f.u)
		case anyBytes:
			v.Kind, v.Bytes = ValueBytes, append([]byte(nil), f.b...)
		case anyArray:
			v.Kind = ValueArray
			v.Array = []Value{}
			return fields(f.b, func(f field) error {
				if f.num != arrayValues {
					return nil
				}
				if err := f.expect("ArrayValue", wantBytes); err != nil {
					return err
				}
				e, err := decodeAnyValue(f.b, depth+1)
				if err != nil {
					return err
				}
				v.Array = append(v.Array, e)
				return nil
			})
		case anyKVList:
			v.Kind = ValueKVList
			v.KVList = []KeyValue{}
			return fields(f.b, func(f field) error {
				if f.num != kvListValues {
					return nil
				}
				if err := f.expect("KeyValueList", wantBytes); err != nil {
					return err
				}
				kv, err := decodeKeyValue(f.b, depth)
				if err != nil {
					return err
				}
				v.KVList = append(v.KVList, kv)
				return nil
			})
		}
		return nil
	})
	return v, err
}
