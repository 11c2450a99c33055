package api

import (
	"context"
	"log/slog"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/engine"
)

// Audited actions: the changes an operator or an agent makes to the
// cluster or to an execution's fate.
const (
	ActionJoin    = "join"               // POST /v1/cluster/nodes
	ActionRemove  = "remove"             // DELETE /v1/cluster/nodes/{id}
	ActionCancel  = engine.ActionCancel  // POST /v1/executions/{id}/cancel, carmy.cancel, tasks/cancel
	ActionResolve = engine.ActionResolve // POST /v1/executions/{id}/resolve, carmy.resolve: completed or failed; a probe's found
	ActionRelease = engine.ActionRelease // the same, released; a probe's not found
	ActionApprove = engine.ActionApprove // POST /v1/executions/{id}/approve
	ActionDeny    = engine.ActionDeny    // POST /v1/executions/{id}/deny
)

// Context keys of the audit middleware.
const (
	codeKey        = "carmy.code"         // the error code handleError chose
	errorBodyKey   = "carmy.error"        // the envelope's error object handleError answered
	auditActionKey = "carmy.audit.action" // a handler's finer action (release)
	auditTargetKey = "carmy.audit.target" // a handler's target, when not the :id
	streamKey      = "carmy.stream"       // time.Duration an answer takes to stream (boundWrite)
)

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
			s.audit(c.Request().Context(), engine.Decision{Action: act, Actor: principal, Target: target, Transport: TransportHTTP, Outcome: outcome},
				slog.Int("status", c.Response().Status), slog.String("remote", c.RealIP()))
			return nil
		}
	}
}

// audit is the one path of every audited action, whoever asked for it (an
// HTTP route, an MCP tool or tasks/cancel, a reconcile probe through
// engine.Runtime.SetAuditor): one log line, "audit", with the decision's
// members and extra, at WARN for anything but ok, and one count
// (Metrics.Audited: carmy_admin_actions_total).
func (s *Server) audit(ctx context.Context, d engine.Decision, extra ...slog.Attr) {
	s.metrics.Audited(d.Action, d.Outcome)
	level := slog.LevelInfo
	if d.Outcome != "ok" {
		level = slog.LevelWarn
	}
	s.log.LogAttrs(ctx, level, engine.AuditMessage, d.Attrs(extra...)...)
}

// Audit is the engine.Auditor of this server: a runtime's own decisions
// (a reconcile probe's) logged and counted as the server's are.
func (s *Server) Audit(ctx context.Context, d engine.Decision) { s.audit(ctx, d) }
