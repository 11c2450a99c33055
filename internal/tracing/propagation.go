package tracing

import (
	"encoding/hex"
	"net/http"

	"go.opentelemetry.io/otel/trace"
)

// The W3C trace context headers.
const (
	headerTraceparent = "Traceparent"
	headerTracestate  = "Tracestate"
)

// traceparentLen is the length of a version 00 traceparent:
// 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>.
const traceparentLen = 55

// parseTraceparent reads a W3C traceparent and tracestate as the remote
// span context they carry, as OpenTelemetry's TraceContext propagator
// does: the zero context for a traceparent that is not valid (version ff,
// a version 00 of another length, ids that are not lowercase hex or are
// all zero); a tracestate that is not valid is left out.
func parseTraceparent(tp, ts string) trace.SpanContext {
	if len(tp) < traceparentLen || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return trace.SpanContext{}
	}
	var ver [1]byte
	if !decodeLowerHex(ver[:], tp[0:2]) || ver[0] == 0xff ||
		(ver[0] == 0 && len(tp) != traceparentLen) || (len(tp) > traceparentLen && tp[traceparentLen] != '-') {
		return trace.SpanContext{}
	}
	var cfg trace.SpanContextConfig
	var flags [1]byte
	if !decodeLowerHex(cfg.TraceID[:], tp[3:35]) || !decodeLowerHex(cfg.SpanID[:], tp[36:52]) ||
		!decodeLowerHex(flags[:], tp[53:55]) || !cfg.TraceID.IsValid() || !cfg.SpanID.IsValid() {
		return trace.SpanContext{}
	}
	cfg.TraceFlags = trace.TraceFlags(flags[0]) & trace.FlagsSampled
	cfg.Remote = true
	if ts != "" {
		if state, err := trace.ParseTraceState(ts); err == nil {
			cfg.TraceState = state
		}
	}
	return trace.NewSpanContext(cfg)
}

// decodeLowerHex decodes s, lowercase hex of exactly 2*len(dst) digits,
// into dst.
func decodeLowerHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, []byte(s))
	return err == nil
}

// formatTraceparent is sc's W3C traceparent, version 00.
func formatTraceparent(sc trace.SpanContext) string {
	var b [traceparentLen]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags() & trace.FlagsSampled)})
	return string(b[:])
}

// fromHeader is the remote span context of h's traceparent and
// tracestate (the zero one without a valid traceparent); of a repeated
// header, the first.
func fromHeader(h http.Header) trace.SpanContext {
	tp := h.Get(headerTraceparent)
	if tp == "" {
		return trace.SpanContext{}
	}
	return parseTraceparent(tp, h.Get(headerTracestate))
}

// fromMeta is the remote span context of an MCP _meta's traceparent and
// tracestate keys (strings).
func fromMeta(meta map[string]any) trace.SpanContext {
	tp, _ := meta[MetaTraceparent].(string)
	if tp == "" {
		return trace.SpanContext{}
	}
	ts, _ := meta[MetaTracestate].(string)
	return parseTraceparent(tp, ts)
}
