package api

import (
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
)

// callLineKey is where a call's log line gathers what the handler and the
// error handler learn.
const callLineKey = "carmy.callline"

// callLine is what one call's log line says.
type callLine struct {
	tool, requestID, session string
	executionID, status      string // the record's, when one was answered or named
	code                     string // the error code, when the answer was an error
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
// body was read (auth, size) has no tool or request_id. Bodies, arguments
// and results are never logged.
func (s *Server) logCall(c echo.Context, l *callLine, outcome string, took time.Duration) {
	ctx := c.Request().Context()
	if !s.log.Enabled(ctx, slog.LevelInfo) {
		return // --log-level warn: no attributes built for a line nobody keeps
	}
	principal := ""
	if id := identityOf(c); id != nil {
		principal = id.caller.Principal
	}
	attrs := make([]slog.Attr, 0, 11)
	attrs = append(attrs,
		slog.String("principal", principal), slog.String("tool", l.tool),
		slog.String("request_id", l.requestID), slog.String("session_id", l.session),
		slog.String("execution_id", l.executionID), slog.String("outcome", outcome))
	if l.status != "" {
		attrs = append(attrs, slog.String("status", l.status))
	}
	if l.code != "" {
		attrs = append(attrs, slog.String("code", l.code))
	}
	attrs = append(attrs, slog.Int("http_status", c.Response().Status),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000))
	s.log.LogAttrs(ctx, slog.LevelInfo, "call", attrs...)
}
