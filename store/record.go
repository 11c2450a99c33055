package store

import (
	"encoding/json"
	"time"
)

// Status is where an execution stands.
type Status string

// The statuses of an execution. Running and Interrupted are open: the
// outcome is not known. The other four are finished and never change again.
const (
	StatusRunning     Status = "running"
	StatusInterrupted Status = "interrupted"
	StatusCompleted   Status = "completed"
	StatusFailed      Status = "failed"
	StatusTimedOut    Status = "timed_out"
	StatusCancelled   Status = "cancelled"
	// StatusAwaitingApproval: the identity is reserved behind an approval
	// gate (Execution.Approval) and the tool has not run; only a decision
	// (Store.Decide) moves it on. It is neither open nor finished.
	StatusAwaitingApproval Status = "awaiting_approval"
	// StatusDenied and StatusExpired are the final statuses of a gated
	// execution that never ran: a person denied it, or no one decided
	// before its gate expired.
	StatusDenied  Status = "denied"
	StatusExpired Status = "expired"
)

// Finished reports whether s is a final status (completed, failed,
// timed_out, cancelled, denied or expired).
func (s Status) Finished() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusTimedOut, StatusCancelled, StatusDenied, StatusExpired:
		return true
	}
	return false
}

// Awaiting reports whether s is awaiting_approval.
func (s Status) Awaiting() bool { return s == StatusAwaitingApproval }

// Open reports whether s is running or interrupted.
func (s Status) Open() bool {
	return s == StatusRunning || s == StatusInterrupted
}

// Valid reports whether s is one of the nine statuses.
func (s Status) Valid() bool { return s.Open() || s.Finished() || s.Awaiting() }

// Execution describes a new execution proposed for an identity. The runtime
// that will run the tool chooses it, so that it can later tell whether the
// reservation it holds is its own.
type Execution struct {
	ID        string    `json:"execution_id"`
	Tool      string    `json:"tool"`
	NodeID    string    `json:"node_id"`
	StartedAt time.Time `json:"started_at"`
	// Quota is the most records the identity's principal (Key.Principal)
	// may hold when this execution is reserved: a reservation of a new
	// identity by a principal holding Quota records or more is refused
	// with a *QuotaError. 0 means no per-principal bound; a negative Quota
	// is invalid. It travels with the reservation (in a replicated store,
	// inside the log entry), so every replica applies the same bound, the
	// proposer's, whatever each node's own configuration says. It does not
	// affect identities the principal already holds.
	Quota int `json:"quota,omitempty"`
	// ByteQuota is the most bytes (RecordSize summed over its records) the
	// principal may hold when this execution is reserved; 0 means no
	// bound. Like Quota it travels with the reservation. A reservation is
	// refused with a *QuotaError (ErrCapacity) when the principal's bytes,
	// the new record's and Headroom together would exceed it.
	ByteQuota int64 `json:"byte_quota,omitempty"`
	// Headroom is room the reservation must leave for the result: the
	// largest result (data or error) the runner will record, as its
	// bound on one result says. A reservation is refused unless its record
	// plus Headroom fits in the principal's ByteQuota and in the store's
	// bound on bytes, so that an accepted reservation normally has room
	// for its outcome. It is checked, not held: concurrent reservations
	// may still fill the room, and then Complete records the overflow
	// bounded (see Store.Complete). 0 checks the record alone.
	Headroom int64 `json:"headroom,omitempty"`
	// DedupeWindow, when positive, lets this execution replace the
	// identity's finished record (same fingerprint) whose StartedAt is
	// DedupeWindow or more before this StartedAt (docs/mcp.md#calls-without-a-request-id-dedupe_window): the
	// reservation is then Reserved, the old record gone (not kept beside
	// it), the counts unchanged. Within the window the record is answered
	// as ever (Replay); a running or interrupted record is never replaced.
	// Both times travel in the commands (in a replicated store, stamped by
	// the proposer), so every replica decides alike.
	DedupeWindow time.Duration `json:"dedupe_window,omitempty"`
	// RetryUncertain lets this execution replace the identity's record of
	// the same fingerprint when that record is timed_out or interrupted
	// (Retries): the tool is idempotent and the caller asked that its
	// uncertain executions be settled by running it again
	// (docs/policy.md). The reservation is then Reserved under the new
	// execution id and a new Seq (its fencing token), the old record gone,
	// the counts unchanged, as under DedupeWindow. The flag travels in the
	// command, so every replica decides alike.
	RetryUncertain bool `json:"retry_uncertain,omitempty"`
	// Approval, when set, gates the execution: the reservation makes the
	// record awaiting_approval instead of running, and the tool runs only
	// once a decision approves it (Store.Decide). Its ExpiresAt is
	// computed by the proposer and travels in the command.
	Approval *ApprovalGate `json:"approval,omitempty"`
}

// Validate checks what every store requires of a reservation's execution:
// an id, no negative bound, no negative window.
func (exec Execution) Validate() error {
	switch {
	case exec.ID == "":
		return invalidf("reserve: empty execution id")
	case exec.Quota < 0 || exec.ByteQuota < 0 || exec.Headroom < 0:
		return invalidf("reserve: negative quota %d, byte quota %d or headroom %d", exec.Quota, exec.ByteQuota, exec.Headroom)
	case exec.DedupeWindow < 0:
		return invalidf("reserve: negative dedupe window %s", exec.DedupeWindow)
	}
	if exec.Approval != nil {
		return exec.Approval.Validate()
	}
	return nil
}

// Expired reports whether exec may replace rec under its DedupeWindow: rec
// is finished and started DedupeWindow or more before exec.
func (exec Execution) Expired(rec Record) bool {
	return exec.DedupeWindow > 0 && rec.Status.Finished() && !exec.StartedAt.Before(rec.StartedAt.Add(exec.DedupeWindow))
}

// Retries reports whether exec may replace rec under RetryUncertain: rec
// is timed_out or interrupted.
func (exec Execution) Retries(rec Record) bool {
	return exec.RetryUncertain && (rec.Status == StatusTimedOut || rec.Status == StatusInterrupted)
}

// Held is how a reservation of fingerprint by exec is answered when the
// store holds rec under its key: Conflict when rec has another
// fingerprint, Reserved when exec replaces rec (Expired, Retries), else Replay for
// a finished rec and Uncertain for a running or interrupted one: State's
// table, by which a caller that read rec without reserving (a peek, a
// lookup) answers as Reserve would. A record awaiting approval is
// answered Awaiting.
func (exec Execution) Held(rec Record, fingerprint string) Outcome {
	switch {
	case rec.Fingerprint != fingerprint:
		return Conflict
	case exec.Expired(rec) || exec.Retries(rec):
		return Reserved
	case rec.Status.Finished():
		return Replay
	case rec.Status.Awaiting():
		return Awaiting
	}
	return Uncertain
}

// Result is the outcome of an execution. Completed carries Data, any JSON
// value; failed, timed_out and cancelled carry Error, a JSON object with at
// least "code" and "message".
type Result struct {
	ExecutionID string          `json:"execution_id"`
	Status      Status          `json:"status"`
	Data        json.RawMessage `json:"data,omitempty"`
	Error       json.RawMessage `json:"error,omitempty"`
	FinishedAt  time.Time       `json:"finished_at"`
	// ByteQuota is the byte quota of the record's principal that applies
	// when this result is recorded (see Execution.ByteQuota); 0 means
	// none. It travels with the completion, so every replica applies the
	// same bound. It is not part of the record.
	ByteQuota int64 `json:"byte_quota,omitempty"`
}

// Validate reports whether r is a well-formed final result.
func (r Result) Validate() error {
	switch {
	case r.ExecutionID == "":
		return invalidf("result has no execution id")
	case r.Status == StatusInterrupted:
		// The runner's own word that its answer was lost: no payload, no
		// finish time; the record stays open.
		if len(r.Data) > 0 || len(r.Error) > 0 || !r.FinishedAt.IsZero() {
			return invalidf("an interrupted result carries no data, error or finish time")
		}
		return nil
	case !r.Status.Finished():
		return invalidf("result status %q is not a final status or interrupted", r.Status)
	case r.Status == StatusDenied || r.Status == StatusExpired:
		return invalidf("result status %q is recorded only by a decision (Decide)", r.Status)
	case r.Status == StatusCompleted && !json.Valid(r.Data):
		return invalidf("completed result needs valid JSON data")
	case r.Status != StatusCompleted && !isObject(r.Error):
		return invalidf("%s result needs a JSON object error", r.Status)
	// The other payload is kept too, when there is one: a record holds
	// only JSON, which its answers and snapshots are written with.
	case r.Status == StatusCompleted && len(r.Error) > 0 && !json.Valid(r.Error):
		return invalidf("completed result has an error that is not valid JSON")
	case r.Status != StatusCompleted && len(r.Data) > 0 && !json.Valid(r.Data):
		return invalidf("%s result has data that is not valid JSON", r.Status)
	case r.FinishedAt.IsZero():
		return invalidf("result has no finish time")
	case r.ByteQuota < 0:
		return invalidf("result has a negative byte quota %d", r.ByteQuota)
	}
	return nil
}

// Record is what a Store keeps for one identity. A Record returned by a
// Store is a copy the caller owns, except for Data, Error, Approval and
// Decision, which callers must treat as read-only.
type Record struct {
	ExecutionID string          `json:"execution_id"`
	Key         Key             `json:"key"`
	Tool        string          `json:"tool"`
	Fingerprint string          `json:"fingerprint"`
	Status      Status          `json:"status"`
	Data        json.RawMessage `json:"data,omitempty"`
	Error       json.RawMessage `json:"error,omitempty"`
	NodeID      string          `json:"node_id"`
	StartedAt   time.Time       `json:"started_at"`
	FinishedAt  time.Time       `json:"finished_at,omitzero"`
	Resolved    bool            `json:"resolved,omitempty"`
	// ResolvedBy, on a resolved record, says who established its outcome:
	// the principal that resolved it, or ResolvedByProbe; empty on one
	// resolved before it was kept.
	ResolvedBy string `json:"resolved_by,omitempty"`
	// Approval is the gate of an execution reserved behind one
	// (Execution.Approval); nil for any other. Decision is the decision
	// taken on it, nil until one is.
	Approval *ApprovalGate   `json:"approval,omitempty"`
	Decision *DecisionRecord `json:"decision,omitempty"`
	// Seq is assigned by the Store when the reservation is made and grows
	// with every reservation. It orders listings and, in a replicated store,
	// is the log index at which the reservation committed: a fencing token.
	Seq uint64 `json:"seq"`
}

// ErrorBody is the usual shape of a Result's Error.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ErrorCode returns the "code" of the record's error, or "" when it has none.
func (r Record) ErrorCode() string {
	var b ErrorBody
	if len(r.Error) == 0 || json.Unmarshal(r.Error, &b) != nil {
		return ""
	}
	return b.Code
}

// apply copies a result's outcome into the record.
func (r *Record) apply(res Result) {
	r.Status = res.Status
	r.Data = clone(res.Data)
	r.Error = clone(res.Error)
	r.FinishedAt = res.FinishedAt
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return len(raw) > 0 && json.Unmarshal(raw, &m) == nil && m != nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
