package tracerecv

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/carmyhq/carmy/internal/tracing/otlpread"
)

// The JSON of Jaeger's query API (GET /api/traces), which Jaeger's UI
// also opens from a file ("JSON File" on its search page).
type (
	jaegerDoc struct {
		Data   []jaegerTrace `json:"data"`
		Total  int           `json:"total"`
		Limit  int           `json:"limit"`
		Offset int           `json:"offset"`
		Errors []string      `json:"errors"`
	}
	jaegerTrace struct {
		TraceID   string                   `json:"traceID"`
		Spans     []jaegerSpan             `json:"spans"`
		Processes map[string]jaegerProcess `json:"processes"`
		Warnings  []string                 `json:"warnings"`
	}
	jaegerSpan struct {
		TraceID       string            `json:"traceID"`
		SpanID        string            `json:"spanID"`
		Flags         int               `json:"flags"`
		OperationName string            `json:"operationName"`
		References    []jaegerReference `json:"references"`
		StartTime     uint64            `json:"startTime"` // µs since the epoch
		Duration      uint64            `json:"duration"`  // µs
		Tags          []jaegerTag       `json:"tags"`
		Logs          []jaegerLog       `json:"logs"`
		ProcessID     string            `json:"processID"`
		Warnings      []string          `json:"warnings"`
	}
	jaegerReference struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	}
	jaegerTag struct {
		Key   string `json:"key"`
		Type  string `json:"type"`
		Value any    `json:"value"`
	}
	jaegerLog struct {
		Timestamp uint64      `json:"timestamp"`
		Fields    []jaegerTag `json:"fields"`
	}
	jaegerProcess struct {
		ServiceName string      `json:"serviceName"`
		Tags        []jaegerTag `json:"tags"`
	}
)

// WriteJaeger writes traces as one JSON document in the format of
// Jaeger's query API, which Jaeger's UI opens as a file: each span with
// its parent as a CHILD_OF reference, start and duration in
// microseconds, its attributes as tags (with span.kind, otel.scope.name,
// otel.status_code and otel.status_description, and error=true for an
// error status, as Jaeger maps OTLP), its events as logs; each resource
// as a process, named by its service.name.
func WriteJaeger(w io.Writer, traces []Trace) error {
	doc := jaegerDoc{Data: make([]jaegerTrace, 0, len(traces)), Errors: nil}
	for _, t := range traces {
		doc.Data = append(doc.Data, jaegerOf(t))
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("writing Jaeger JSON: %w", err)
	}
	return nil
}

func jaegerOf(t Trace) jaegerTrace {
	jt := jaegerTrace{TraceID: t.ID.String(), Spans: make([]jaegerSpan, 0, len(t.Spans)), Processes: map[string]jaegerProcess{}}
	processIDs := map[string]string{} // a resource's key → its process id
	for _, s := range t.Spans {
		key := resourceKey(s.Resource)
		pid, ok := processIDs[key]
		if !ok {
			pid = fmt.Sprintf("p%d", len(processIDs)+1)
			processIDs[key] = pid
			p := jaegerProcess{ServiceName: serviceName(s.Resource), Tags: []jaegerTag{}}
			for _, kv := range s.Resource {
				if kv.Key != "service.name" {
					p.Tags = append(p.Tags, jaegerTagOf(kv.Key, kv.Value))
				}
			}
			jt.Processes[pid] = p
		}
		js := jaegerSpan{
			TraceID: t.ID.String(), SpanID: s.SpanID.String(), Flags: 1, OperationName: s.Name,
			References: []jaegerReference{}, StartTime: s.StartUnixNano / 1000, Tags: []jaegerTag{}, Logs: []jaegerLog{}, ProcessID: pid,
		}
		if s.EndUnixNano > s.StartUnixNano {
			js.Duration = (s.EndUnixNano - s.StartUnixNano) / 1000
		}
		if !s.ParentSpanID.IsZero() {
			js.References = append(js.References, jaegerReference{RefType: "CHILD_OF", TraceID: t.ID.String(), SpanID: s.ParentSpanID.String()})
		}
		for _, kv := range s.Attributes {
			js.Tags = append(js.Tags, jaegerTagOf(kv.Key, kv.Value))
		}
		if s.Kind != otlpread.KindUnspecified {
			js.Tags = append(js.Tags, jaegerTag{Key: "span.kind", Type: "string", Value: s.Kind.String()})
		}
		if s.Scope.Name != "" {
			js.Tags = append(js.Tags, jaegerTag{Key: "otel.scope.name", Type: "string", Value: s.Scope.Name})
		}
		if s.Status.Code != otlpread.StatusUnset {
			js.Tags = append(js.Tags, jaegerTag{Key: "otel.status_code", Type: "string", Value: strings.ToUpper(s.Status.Code.String())})
			if s.Status.Message != "" {
				js.Tags = append(js.Tags, jaegerTag{Key: "otel.status_description", Type: "string", Value: s.Status.Message})
			}
			if s.Status.Code == otlpread.StatusError {
				js.Tags = append(js.Tags, jaegerTag{Key: "error", Type: "bool", Value: true})
			}
		}
		for _, e := range s.Events {
			l := jaegerLog{Timestamp: e.TimeUnixNano / 1000, Fields: []jaegerTag{{Key: "event", Type: "string", Value: e.Name}}}
			for _, kv := range e.Attributes {
				l.Fields = append(l.Fields, jaegerTagOf(kv.Key, kv.Value))
			}
			js.Logs = append(js.Logs, l)
		}
		jt.Spans = append(jt.Spans, js)
	}
	return jt
}

// jaegerTagOf maps an attribute to a Jaeger tag: strings, bools, ints and
// finite doubles as themselves, bytes as base64 "binary", arrays and
// lists as their JSON text.
func jaegerTagOf(key string, v otlpread.Value) jaegerTag {
	switch v.Kind {
	case otlpread.ValueBool:
		return jaegerTag{Key: key, Type: "bool", Value: v.Bool}
	case otlpread.ValueInt:
		return jaegerTag{Key: key, Type: "int64", Value: v.Int}
	case otlpread.ValueDouble:
		if !math.IsInf(v.Double, 0) && !math.IsNaN(v.Double) {
			return jaegerTag{Key: key, Type: "float64", Value: v.Double}
		}
	case otlpread.ValueBytes:
		return jaegerTag{Key: key, Type: "binary", Value: base64.StdEncoding.EncodeToString(v.Bytes)}
	case otlpread.ValueArray, otlpread.ValueKVList:
		raw, err := json.Marshal(plain(v))
		if err == nil {
			return jaegerTag{Key: key, Type: "string", Value: string(raw)}
		}
	}
	return jaegerTag{Key: key, Type: "string", Value: v.String()}
}

// plain returns v as Go values that encoding/json writes as JSON.
func plain(v otlpread.Value) any {
	switch v.Kind {
	case otlpread.ValueString:
		return v.Str
	case otlpread.ValueBool:
		return v.Bool
	case otlpread.ValueInt:
		return v.Int
	case otlpread.ValueDouble:
		if !math.IsInf(v.Double, 0) && !math.IsNaN(v.Double) {
			return v.Double
		}
	case otlpread.ValueArray:
		out := make([]any, len(v.Array))
		for i, e := range v.Array {
			out[i] = plain(e)
		}
		return out
	case otlpread.ValueKVList:
		out := make(map[string]any, len(v.KVList))
		for _, kv := range v.KVList {
			out[kv.Key] = plain(kv.Value)
		}
		return out
	case otlpread.ValueEmpty:
		return nil
	}
	return v.String() // bytes in hex, NaN and ±Inf
}

// resourceKey identifies a resource by its attributes.
func resourceKey(attrs []otlpread.KeyValue) string {
	parts := make([]string, len(attrs))
	for i, kv := range attrs {
		parts[i] = fmt.Sprintf("%q=%q", kv.Key, kv.Value.String())
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
