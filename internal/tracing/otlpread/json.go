package otlpread

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// DecodeJSON reads an ExportTraceServiceRequest in OTLP/JSON, the JSON
// mapping of protobuf as OTLP/HTTP's application/json uses it: field
// names in lowerCamelCase, trace and span ids in hex, enums as numbers,
// 64-bit integers as numbers or strings, bytes in base64. Unknown fields
// are ignored; the same input a Decode error would name (ids of a wrong
// length, values nested too deep) is an error, wrapping ErrMalformed.
func DecodeJSON(b []byte) (*Request, error) {
	var in jsonRequest
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the JSON object", ErrMalformed)
	}
	req, err := in.request()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return req, nil
}

// The OTLP/JSON messages.
type (
	jsonRequest struct {
		ResourceSpans []struct {
			Resource struct {
				Attributes []jsonKeyValue `json:"attributes"`
			} `json:"resource"`
			ScopeSpans []struct {
				Scope struct {
					Name    string `json:"name"`
					Version string `json:"version"`
				} `json:"scope"`
				Spans []jsonSpan `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	jsonSpan struct {
		TraceID           string         `json:"traceId"`
		SpanID            string         `json:"spanId"`
		TraceState        string         `json:"traceState"`
		ParentSpanID      string         `json:"parentSpanId"`
		Name              string         `json:"name"`
		Kind              int32          `json:"kind"`
		StartTimeUnixNano jsonUint64     `json:"startTimeUnixNano"`
		EndTimeUnixNano   jsonUint64     `json:"endTimeUnixNano"`
		Attributes        []jsonKeyValue `json:"attributes"`
		Events            []struct {
			TimeUnixNano jsonUint64     `json:"timeUnixNano"`
			Name         string         `json:"name"`
			Attributes   []jsonKeyValue `json:"attributes"`
		} `json:"events"`
		Status struct {
			Message string `json:"message"`
			Code    int32  `json:"code"`
		} `json:"status"`
	}
	jsonKeyValue struct {
		Key   string    `json:"key"`
		Value jsonValue `json:"value"`
	}
	jsonValue struct {
		StringValue *string     `json:"stringValue"`
		BoolValue   *bool       `json:"boolValue"`
		IntValue    *jsonInt64  `json:"intValue"`
		DoubleValue *jsonDouble `json:"doubleValue"`
		ArrayValue  *struct {
			Values []jsonValue `json:"values"`
		} `json:"arrayValue"`
		KvlistValue *struct {
			Values []jsonKeyValue `json:"values"`
		} `json:"kvlistValue"`
		BytesValue *string `json:"bytesValue"`
	}
)

// jsonUint64 is a uint64 written as a JSON number or string.
type jsonUint64 uint64

func (u *jsonUint64) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseUint(string(unquote(b)), 10, 64)
	if err != nil {
		return fmt.Errorf("want an unsigned 64-bit integer, got %s", clip(b))
	}
	*u = jsonUint64(v)
	return nil
}

// jsonInt64 is an int64 written as a JSON number or string.
type jsonInt64 int64

func (i *jsonInt64) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseInt(string(unquote(b)), 10, 64)
	if err != nil {
		return fmt.Errorf("want a 64-bit integer, got %s", clip(b))
	}
	*i = jsonInt64(v)
	return nil
}

// jsonDouble is a double written as a JSON number, or as the string
// "NaN", "Infinity" or "-Infinity" (or a number in a string).
type jsonDouble float64

func (d *jsonDouble) UnmarshalJSON(b []byte) error {
	s := string(unquote(b))
	switch s {
	case "NaN":
		*d = jsonDouble(math.NaN())
	case "Infinity":
		*d = jsonDouble(math.Inf(1))
	case "-Infinity":
		*d = jsonDouble(math.Inf(-1))
	default:
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("want a number, got %s", clip(b))
		}
		*d = jsonDouble(v)
	}
	return nil
}

// unquote strips the quotes of a JSON string holding a number.
func unquote(b []byte) []byte {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		return b[1 : len(b)-1]
	}
	return b
}

// clip shortens b for an error message.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

func (in *jsonRequest) request() (*Request, error) {
	req := &Request{}
	for i, rs := range in.ResourceSpans {
		out := ResourceSpans{}
		var err error
		if out.Attributes, err = jsonAttributes(rs.Resource.Attributes, 0); err != nil {
			return nil, fmt.Errorf("resourceSpans %d: resource attribute: %w", i, err)
		}
		for j, ss := range rs.ScopeSpans {
			scope := ScopeSpans{Scope: Scope{Name: ss.Scope.Name, Version: ss.Scope.Version}}
			for k, s := range ss.Spans {
				span, err := s.span()
				if err != nil {
					return nil, fmt.Errorf("resourceSpans %d: scopeSpans %d: span %d: %w", i, j, k, err)
				}
				scope.Spans = append(scope.Spans, span)
			}
			out.Scopes = append(out.Scopes, scope)
		}
		req.Resources = append(req.Resources, out)
	}
	return req, nil
}

func (s *jsonSpan) span() (Span, error) {
	out := Span{
		TraceState: s.TraceState, Name: s.Name, Kind: SpanKind(s.Kind),
		StartUnixNano: uint64(s.StartTimeUnixNano), EndUnixNano: uint64(s.EndTimeUnixNano),
		Status: Status{Code: StatusCode(s.Status.Code), Message: s.Status.Message},
	}
	if err := hexID(out.TraceID[:], s.TraceID, "traceId"); err != nil || out.TraceID == (TraceID{}) {
		return out, errors.Join(errors.New("no traceId, or an all-zero one"), err)
	}
	if err := hexID(out.SpanID[:], s.SpanID, "spanId"); err != nil || out.SpanID.IsZero() {
		return out, errors.Join(errors.New("no spanId, or an all-zero one"), err)
	}
	if s.ParentSpanID != "" {
		if err := hexID(out.ParentSpanID[:], s.ParentSpanID, "parentSpanId"); err != nil {
			return out, err
		}
	}
	var err error
	if out.Attributes, err = jsonAttributes(s.Attributes, 0); err != nil {
		return out, fmt.Errorf("attribute: %w", err)
	}
	for i, e := range s.Events {
		ev := Event{TimeUnixNano: uint64(e.TimeUnixNano), Name: e.Name}
		if ev.Attributes, err = jsonAttributes(e.Attributes, 0); err != nil {
			return out, fmt.Errorf("event %d: attribute: %w", i, err)
		}
		out.Events = append(out.Events, ev)
	}
	return out, nil
}

// hexID decodes the hex id s into dst, which it must fill exactly.
func hexID(dst []byte, s, name string) error {
	if len(s) != 2*len(dst) {
		return fmt.Errorf("%s of %d hex digits, want %d", name, len(s), 2*len(dst))
	}
	if _, err := hex.Decode(dst, []byte(s)); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// jsonAttributes converts attributes whose values are nested depth
// values deep.
func jsonAttributes(in []jsonKeyValue, depth int) ([]KeyValue, error) {
	var out []KeyValue
	for _, kv := range in {
		v, err := kv.Value.value(depth + 1)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", kv.Key, err)
		}
		out = append(out, KeyValue{Key: kv.Key, Value: v})
	}
	return out, nil
}

// value converts an AnyValue nested depth values deep.
func (v *jsonValue) value(depth int) (Value, error) {
	if depth > maxValueNesting {
		return Value{}, fmt.Errorf("values nested more than %d deep", maxValueNesting)
	}
	switch {
	case v.StringValue != nil:
		return Value{Kind: ValueString, Str: *v.StringValue}, nil
	case v.BoolValue != nil:
		return Value{Kind: ValueBool, Bool: *v.BoolValue}, nil
	case v.IntValue != nil:
		return Value{Kind: ValueInt, Int: int64(*v.IntValue)}, nil
	case v.DoubleValue != nil:
		return Value{Kind: ValueDouble, Double: float64(*v.DoubleValue)}, nil
	case v.BytesValue != nil:
		b, err := base64.StdEncoding.DecodeString(*v.BytesValue)
		if err != nil { // protobuf's JSON mapping takes URL-safe base64 too
			if b, err = base64.URLEncoding.DecodeString(*v.BytesValue); err != nil {
				return Value{}, fmt.Errorf("bytesValue: %w", err)
			}
		}
		return Value{Kind: ValueBytes, Bytes: b}, nil
	case v.ArrayValue != nil:
		out := Value{Kind: ValueArray, Array: []Value{}}
		for _, e := range v.ArrayValue.Values {
			ev, err := e.value(depth + 1)
			if err != nil {
				return Value{}, err
			}
			out.Array = append(out.Array, ev)
		}
		return out, nil
	case v.KvlistValue != nil:
		kvs, err := jsonAttributes(v.KvlistValue.Values, depth)
		if err != nil {
			return Value{}, err
		}
		if kvs == nil {
			kvs = []KeyValue{}
		}
		return Value{Kind: ValueKVList, KVList: kvs}, nil
	}
	return Value{}, nil
}
