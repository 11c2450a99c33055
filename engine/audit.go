package engine

import (
	"context"
	"log/slog"

	"github.com/carmyhq/carmy/store"
)

// The audited decisions about an execution's fate (docs/operations.md,
// "Audit"): whoever asks for one — a caller over HTTP or the console, an
// MCP tool or tasks/cancel, a reconcile probe — it is told to the
// runtime's Auditor as one Decision.
const (
	ActionCancel  = "cancel"  // a running execution cancelled
	ActionResolve = "resolve" // an interrupted execution resolved completed or failed
	ActionRelease = "release" // a reservation removed
)

// TransportProbe is the Decision.Transport of a reconcile probe's
// resolution; its actor is store.ResolvedByProbe.
const TransportProbe = "probe"

// Decision is one audited action: who asked (Actor: a principal, "-" when
// the request was refused before one was known, or "probe"), through what
// (Transport: "http", "mcp" or TransportProbe), what (Action, Target: an
// execution id, or a node for a cluster change) and how it ended
// (Outcome: "ok" or the error code of the refusal or failure).
type Decision struct {
	Action    string
	Actor     string
	Target    string
	Transport string
	Outcome   string
}

// Attrs are the members of d's audit log line, the same whoever logs it:
// action, principal, target, outcome, then extra, then transport.
func (d Decision) Attrs(extra ...slog.Attr) []slog.Attr {
	attrs := []slog.Attr{
		slog.String("action", d.Action), slog.String("principal", d.Actor), slog.String("target", d.Target),
		slog.String("outcome", d.Outcome),
	}
	attrs = append(attrs, extra...)
	return append(attrs, slog.String("transport", d.Transport))
}

// AuditMessage is the message of every audit log line.
const AuditMessage = "audit"

// Outcome is the Decision.Outcome of err: "ok" for nil, else its error
// code (store.CodeOf), INTERNAL when it has none.
func Outcome(err error) string {
	if err == nil {
		return "ok"
	}
	if code := store.CodeOf(err); code != "" {
		return code
	}
	return store.CodeInternal
}

// Auditor logs and counts one Decision. It is called on the path of the
// request that asked for it (or of the probe): it must be quick and safe
// for concurrent use.
type Auditor func(ctx context.Context, d Decision)

// SetAuditor installs the function every audited decision goes to (a
// server: its audit log line and carmy_admin_actions_total). Without
// one, the runtime logs the line itself, uncounted.
func (r *Runtime) SetAuditor(a Auditor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.auditor = a
}

// audit tells d, a probe's resolution, to the Auditor SetAuditor
// installed, or logs it. (A front end tells its own callers' decisions to
// the same Auditor.)
func (r *Runtime) audit(ctx context.Context, d Decision) {
	r.mu.RLock()
	a := r.auditor
	r.mu.RUnlock()
	if a != nil {
		a(ctx, d)
		return
	}
	level := slog.LevelInfo
	if d.Outcome != "ok" {
		level = slog.LevelWarn
	}
	r.cfg.Logger.LogAttrs(ctx, level, AuditMessage, d.Attrs()...)
}
