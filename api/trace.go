package api

import "github.com/carmyhq/carmy/internal/tracing"

// traceCall sets on span, the span of a call (tracing.SpanCall, started
// by meterCalls for POST /v1/tools/call and by api/mcp for a tools/call at
// /mcp), what the call log says of it, the same for both transports
// (docs/tracing.md).
func traceCall(span *tracing.Span, e callEntry) {
	tracing.SetCall(span, tracing.Call{Transport: e.transport, Principal: e.principal, Tool: e.tool,
		ExecutionID: e.executionID, Outcome: e.outcome, Replayed: e.outcome == OutcomeReplayed})
}
