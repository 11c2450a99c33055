package api

import (
	"log/slog"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// Audited actions: the changes an operator or an agent makes to the
// cluster or to an execution's fate.
const (
	ActionJoin    = "join"    // POST /v1/cluster/nodes
	ActionRemove  = "remove"  // DELETE /v1/cluster/nodes/{id}
	ActionCancel  = "cancel"  // POST /v1/executions/{id}/cancel
	ActionResolve = "resolve" // POST /v1/executions/{id}/resolve, completed or failed
	ActionRelease = "release" // POST /v1/executions/{id}/resolve, released
)

// Context keys of the audit middleware.
const (
	codeKey        = "carmy.code"         // the error code handleError chose
	errorBodyKey   = "carmy.error"        // the envelope's error object handleError answered
	auditActionKey = "carmy.audit.action" // a handler's finer action (release)
	auditTargetKey = "carmy.audit.target" // a handler's target, when not the :id
	streamKey      = "carmy.stream"       // time.Duration an answer takes to stream (boundWrite)
)

func newAuditCounter(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "carmy_admin_actions_total",
		Help: "Audited actions (join, remove, cancel, resolve, release) by outcome: ok or the error code.",
	}, []string{"action", "outcome"})
	return register(reg, c)
}

// audited is the outermost middleware of a route that changes the
// cluster or an execution: it answers an error through the error handler
// itself (so the outcome is known), then logs one audit line — action,
// principal, target, outcome — and counts it. Refusals (401, 403) are
// audited too.
func (s *Server) audited(action string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := next(c); err != nil {
				s.echo.HTTPErrorHandler(err, c)
			}
			act := action
			if a, ok := c.Get(auditActionKey).(string); ok {
				act = a
			}
			target, _ := c.Get(auditTargetKey).(string)
			if target == "" {
				target = c.Param("id")
			}
			principal := "-"
			if caller := callerOf(c); caller != nil {
				principal = caller.Principal
			}
			outcome := "ok"
			if code, ok := c.Get(codeKey).(string); ok {
				outcome = code
			}
			s.auditCount.WithLabelValues(act, outcome).Inc()
			level := slog.LevelInfo
			if outcome != "ok" {
				level = slog.LevelWarn
			}
			s.log.Log(c.Request().Context(), level, "audit",
				slog.String("action", act), slog.String("principal", principal),
				slog.String("target", target), slog.String("outcome", outcome),
				slog.Int("status", c.Response().Status), slog.String("remote", c.RealIP()),
				slog.String("transport", TransportHTTP))
			return nil
		}
	}
}
