package otlp

import (
	"math"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of opentelemetry.proto.common.v1: KeyValue, AnyValue (a
// oneof), ArrayValue and KeyValueList.
const (
	keyValueKey   protowire.Number = 1
	keyValueValue protowire.Number = 2

	anyString protowire.Number = 1
	anyBool   protowire.Number = 2
	anyInt    protowire.Number = 3
	anyDouble protowire.Number = 4
	anyArray  protowire.Number = 5
	anyKVList protowire.Number = 6
	anyBytes  protowire.Number = 7

	arrayValues  protowire.Number = 1
	kvListValues protowire.Number = 1
)

// appendKeyValues appends each of attrs as a KeyValue, repeated field num.
func appendKeyValues(b []byte, num protowire.Number, attrs []attribute.KeyValue) []byte {
	for _, kv := range attrs {
		b = appendKeyValue(b, num, kv)
	}
	return b
}

// appendKeyValue appends kv as KeyValue field num: its key and its value,
// always present (an empty AnyValue for an attribute of no value).
func appendKeyValue(b []byte, num protowire.Number, kv attribute.KeyValue) []byte {
	b, start := openMessage(b, num)
	b = appendString(b, keyValueKey, string(kv.Key))
	b = appendAnyValue(b, keyValueValue, kv.Value)
	return closeMessage(b, start)
}

// appendAnyValue appends v as AnyValue field num, with the member of the
// oneof its type maps to (written even when it is the member's default,
// so that the receiver knows the type): string, bool, int64, double,
// bytes; slices as an ArrayValue, a map as a KeyValueList; nothing for
// an empty value, and the string "INVALID" for a type unknown here.
func appendAnyValue(b []byte, num protowire.Number, v attribute.Value) []byte {
	b, start := openMessage(b, num)
	switch v.Type() {
	case attribute.EMPTY:
	case attribute.STRING:
		b = protowire.AppendTag(b, anyString, protowire.BytesType)
		b = protowire.AppendString(b, v.AsString())
	case attribute.BOOL:
		b = protowire.AppendTag(b, anyBool, protowire.VarintType)
		b = protowire.AppendVarint(b, protowire.EncodeBool(v.AsBool()))
	case attribute.INT64:
		b = appendAnyInt(b, v.AsInt64())
	case attribute.FLOAT64:
		b = appendAnyDouble(b, v.AsFloat64())
	case attribute.BYTESLICE:
		b = protowire.AppendTag(b, anyBytes, protowire.BytesType)
		b = protowire.AppendBytes(b, v.AsByteSlice())
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE, attribute.SLICE:
		b = appendArray(b, v)
	case attribute.MAP:
		var list int
		b, list = openMessage(b, anyKVList)
		b = appendKeyValues(b, kvListValues, v.AsMap())
		b = closeMessage(b, list)
	default:
		b = protowire.AppendTag(b, anyString, protowire.BytesType)
		b = protowire.AppendString(b, "INVALID")
	}
	return closeMessage(b, start)
}

func appendAnyInt(b []byte, i int64) []byte {
	b = protowire.AppendTag(b, anyInt, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(i))
}

func appendAnyDouble(b []byte, f float64) []byte {
	b = protowire.AppendTag(b, anyDouble, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(f))
}

// appendArray appends the slice v as the ArrayValue member of an
// AnyValue: one AnyValue per element.
func appendArray(b []byte, v attribute.Value) []byte {
	b, start := openMessage(b, anyArray)
	switch v.Type() {
	case attribute.BOOLSLICE:
		for _, e := range v.AsBoolSlice() {
			b = appendAnyValue(b, arrayValues, attribute.BoolValue(e))
		}
	case attribute.INT64SLICE:
		for _, e := range v.AsInt64Slice() {
			b = appendAnyValue(b, arrayValues, attribute.Int64Value(e))
		}
	case attribute.FLOAT64SLICE:
		for _, e := range v.AsFloat64Slice() {
			b = appendAnyValue(b, arrayValues, attribute.Float64Value(e))
		}
	case attribute.STRINGSLICE:
		for _, e := range v.AsStringSlice() {
			b = appendAnyValue(b, arrayValues, attribute.StringValue(e))
		}
	case attribute.SLICE:
		for _, e := range v.AsSlice() {
			b = appendAnyValue(b, arrayValues, e)
		}
	}
	return closeMessage(b, start)
}
