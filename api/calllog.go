package api

import (
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

// logCall writes one line per call: who called which tool under which
// identity, which execution answered, the outcome (ran, replayed,
// conflict, …) and the time the answer took. A call refused before its
// body was read (auth, size) has no tool or request_id. An error answer
// gives the code, and the execution and status it names, from the
// envelope the error handler wrote. Bodies, arguments and results are
// never logged.
func (s *Server) logCall(c echo.Context, l *callLine, outcome string, took time.Duration) {
	ctx := c.Request().Context()
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return // --log-level warn: no attributes built for a line nobody keeps
	}
	principal := ""
	if caller := callerOf(c); caller != nil {
		principal = caller.Principal
	}
	executionID, status, code := l.executionID, l.status, ""
	if body, ok := c.Get(errorBodyKey).(map[string]any); ok {
		code, _ = body["code"].(string)
		if id, ok := body["execution_id"].(string); ok {
			executionID = id
		}
		if st, ok := body["status"].(store.Status); ok {
			status = string(st)
		}
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("principal", principal), slog.String("tool", l.tool),
		slog.String("request_id", l.requestID), slog.String("session_id", l.session),
		slog.String("execution_id", executionID), slog.String("outcome", outcome))
	if status != "" {
		attrs = append(attrs, slog.String("status", status))
	}
	if code != "" {
		attrs = append(attrs, slog.String("code", code))
	}
	attrs = append(attrs, slog.String("transport", TransportHTTP), slog.Int("http_status", c.Response().Status),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000))
	s.log.LogAttrs(ctx, slog.LevelInfo, "call", attrs...)
}
