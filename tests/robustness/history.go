package robustness

import "fmt"

// Kind classifies how one call ended, as the client saw it.
type Kind int

const (
	KindOK          Kind = iota // 200: a result (new or replay)
	KindConflict                // 409 IDEMPOTENCY_CONFLICT
	KindUncertain               // 409 EXECUTION_UNCERTAIN (status running or interrupted)
	KindUnavailable             // 503 UNAVAILABLE: the node says the tool did not run (fail closed); a reservation may still have been committed and is then released later (or marked interrupted if its node died)
	KindUnknown                 // no answer, client timeout, connection error, any other 5xx: may or may not have happened, tool may or may not have run
	KindAwaiting                // a gated call's 202 (or MCP's APPROVAL_PENDING): reserved, awaiting a decision; the tool has not run
)

// String names the kind for descriptions and errors.
func (k Kind) String() string {
	switch k {
	case KindOK:
		return "ok"
	case KindConflict:
		return "conflict"
	case KindUncertain:
		return "uncertain"
	case KindUnavailable:
		return "unavailable"
	case KindUnknown:
		return "unknown"
	case KindAwaiting:
		return "awaiting"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Op is one tool call of the workload, as the client observed it.
type Op struct {
	Client      int    // client id
	Key         string // the identity (request_id; one principal and session)
	Fingerprint string // names the arguments: two calls of one Key with equal Fingerprint are the same call, different ones conflict
	Call        int64  // ns since the run started, when the request was sent
	Return      int64  // ns since the run started, when the answer arrived; ignored for KindUnknown (treated as never returned)
	Kind        Kind
	ExecutionID string // from the answer (OK, Conflict, Uncertain); "" when absent
	Status      string // OK: completed|failed|timed_out|cancelled; Uncertain: running|interrupted
	Replayed    bool   // OK only
	Result      string // OK only: a canonical encoding of the recorded outcome (status, data or error), the same over either transport; equal outcomes have equal strings
	Stamps      string // OK over HTTP only: the record's started_at|finished_at (an MCP answer carries none)
	Node        string // which node answered (for descriptions)
	Transport   string // "http", or "mcp/<protocol version>"
	Gated       bool   // a call of the gated tool (checkGated, not the model, checks its identity)
}

// Record statuses of the contract (docs/api.md#concepts).
const (
	statusRunning     = "running"
	statusInterrupted = "interrupted"
)

var finalStatuses = map[string]bool{"completed": true, "failed": true, "timed_out": true, "cancelled": true}

// Statuses of approval gates (docs/policy.md#approval-gates): a gated
// call reserved awaiting a decision, and the final statuses of one that
// never ran (replayed like the others).
const (
	statusAwaiting = "awaiting_approval"
	statusDenied   = "denied"
	statusExpired  = "expired"
)

// gateStatuses are the final statuses only a gated call may be answered.
var gateStatuses = map[string]bool{statusDenied: true, statusExpired: true}

// answerStatus reports whether status may be a 200 answer's: a final
// status, the model's or a gate's.
func answerStatus(status string) bool { return finalStatuses[status] || gateStatuses[status] }

// validate reports an op the model cannot interpret: an unknown kind, a
// status that does not fit the kind, or an answer that came before its call.
func (o Op) validate() error {
	switch o.Kind {
	case KindOK:
		if !finalStatuses[o.Status] {
			return fmt.Errorf("ok answer with status %q, want a final status", o.Status)
		}
	case KindUncertain:
		if o.Status != statusRunning && o.Status != statusInterrupted {
			return fmt.Errorf("uncertain answer with status %q, want running or interrupted", o.Status)
		}
	case KindConflict, KindUnavailable, KindUnknown:
	default:
		return fmt.Errorf("unknown kind %v", o.Kind)
	}
	if o.Kind != KindUnknown && o.Return < o.Call {
		return fmt.Errorf("%v answer returned at %d, before its call at %d", o.Kind, o.Return, o.Call)
	}
	return nil
}
