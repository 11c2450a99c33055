package mcp

import (
	"context"
	"log/slog"

	"github.com/carmyhq/carmy/engine"
)

// TransportMCP is the engine.Decision.Transport of the decisions asked for
// at /mcp.
const TransportMCP = "mcp"

// audit tells Config.Audit of a cancel or a resolution asked for at /mcp
// (carmy.cancel, carmy.resolve, tasks/cancel), whatever its outcome: code
// is "" when it was done, else the error code it was refused with.
// Without Config.Audit the line is logged here, uncounted.
func (h *Handler) audit(ctx context.Context, action, principal, target, code string) {
	d := engine.Decision{Action: action, Actor: principal, Target: target, Transport: TransportMCP, Outcome: code}
	if d.Outcome == "" {
		d.Outcome = "ok"
	}
	if h.cfg.Audit != nil {
		h.cfg.Audit(ctx, d)
		return
	}
	level := slog.LevelInfo
	if d.Outcome != "ok" {
		level = slog.LevelWarn
	}
	h.log.LogAttrs(ctx, level, engine.AuditMessage, d.Attrs()...)
}

// auditCode is the audit outcome code of a runtime error: "" for nil.
func auditCode(err error) string {
	if err == nil {
		return ""
	}
	return engine.Outcome(err)
}
