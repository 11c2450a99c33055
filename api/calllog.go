package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/store"
)

// callLineKey is where a call's log line gathers what the handler and the
// error handler learn.
const callLineKey = "carmy.callline"

// callLine is what the call handler learns for the call's log line.
type callLine struct {
	tool, requestID, session string
	executionID, status      string // the record's, when one was answered
}

// callLineOf returns the call's line, or a throwaway one when the route
// does not log calls.
func callLineOf(c echo.Context) *callLine {
	if l, ok := c.Get(callLineKey).(*callLine); ok {
		return l
	}
	return &callLine{}
}

// logCall writes one line per call of POST /v1/tools/call (logCallEntry):
// a call refused before its body was read (auth, size) has no tool or
// request_id; an error answer gives the code, and the execution and
// status it names, from the envelope the error handler wrote.
func (s *Server) logCall(c echo.Context, l *callLine, outcome string, took time.Duration) {
	ctx := c.Request().Context()
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return // --log-level warn: no attributes built for a line nobody keeps
	}
	e := httpCallEntry(c, l, outcome)
	e.took = took
	s.logCallEntry(ctx, e)
}

// httpCallEntry is what a call of POST /v1/tools/call answered: l, the
// caller, and the code, execution and status of an error answer, from the
// envelope the error handler wrote.
func httpCallEntry(c echo.Context, l *callLine, outcome string) callEntry {
	e := callEntry{transport: TransportHTTP, tool: l.tool, requestID: l.requestID, session: l.session,
		executionID: l.executionID, status: l.status, outcome: outcome, httpStatus: c.Response().Status}
	if caller := callerOf(c); caller != nil {
		e.principal = caller.Principal
	}
	if body, ok := c.Get(errorBodyKey).(map[string]any); ok {
		e.code, _ = body["code"].(string)
		if id, ok := body["execution_id"].(string); ok {
			e.executionID = id
		}
		if st, ok := body["status"].(store.Status); ok {
			e.status = string(st)
		}
	}
	return e
}

// callEntry is what the call log says of one call, by either transport.
type callEntry struct {
	transport                           string // TransportHTTP or TransportMCP
	principal, tool, requestID, session string
	executionID, status, code, outcome  string
	httpStatus                          int // POST /v1/tools/call's only
	took                                time.Duration
}

// logCallEntry writes the line of one call, the same for both transports:
// who called which tool under which identity, which execution answered,
// the outcome (ran, replayed, conflict, …), the code of a refusal, the
// transport, the HTTP status (of POST /v1/tools/call) and the time the
// answer took. Bodies, arguments and results are never logged.
func (s *Server) logCallEntry(ctx context.Context, e callEntry) {
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("principal", e.principal), slog.String("tool", e.tool),
		slog.String("request_id", e.requestID), slog.String("session_id", e.session),
		slog.String("execution_id", e.executionID), slog.String("outcome", e.outcome))
	if e.status != "" {
		attrs = append(attrs, slog.String("status", e.status))
	}
	if e.code != "" {
		attrs = append(attrs, slog.String("code", e.code))
	}
	attrs = append(attrs, slog.String("transport", e.transport))
	if e.transport == TransportHTTP {
		attrs = append(attrs, slog.Int("http_status", e.httpStatus))
	}
	attrs = append(attrs, slog.Float64("duration_ms", float64(e.took.Microseconds())/1000))
	s.log.LogAttrs(ctx, slog.LevelInfo, "call", attrs...)
}
