package store

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
)

// ApprovalGate is what a gated execution waits for (docs/policy.md#approval-gates):
// a decision by one of Approvers (or the admin, whom the runtime allows
// besides), before ExpiresAt. It is kept on the record so that any node
// can check who may decide and whether the gate has expired.
type ApprovalGate struct {
	// Approvers are the principals who may decide; empty means the admin
	// alone.
	Approvers []string `json:"approvers,omitempty"`
	// ExpiresAt is when the gate expires: a decision at or after it
	// records expired, whatever it asked for.
	ExpiresAt time.Time `json:"expires_at"`
	// Arguments and Metadata are the call's, kept until the decision so
	// that whichever node approves it can run the tool (the reserving
	// node may be gone) and a person can see what is asked. They count in
	// RecordSize.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// MaxApprovers bounds ApprovalGate.Approvers.
const MaxApprovers = 64

// Validate reports whether g is well formed: an expiry, at most
// MaxApprovers approvers, each a name of at most MaxResolvedBy bytes of
// UTF-8 without NUL.
func (g ApprovalGate) Validate() error {
	if g.ExpiresAt.IsZero() {
		return invalidf("approval: no expiry")
	}
	if len(g.Approvers) > MaxApprovers {
		return invalidf("approval: %d approvers, at most %d", len(g.Approvers), MaxApprovers)
	}
	for _, p := range []json.RawMessage{g.Arguments, g.Metadata} {
		if len(p) > 0 && !isObject(p) {
			return invalidf("approval: the arguments and metadata must be JSON objects")
		}
	}
	for _, a := range g.Approvers {
		if a == "" || !validName(a, MaxResolvedBy) {
			return invalidf("approval: an approver must be 1 to %d bytes of UTF-8 without NUL", MaxResolvedBy)
		}
	}
	return nil
}

// clone returns a copy of g that shares nothing with it.
func (g *ApprovalGate) clone() *ApprovalGate {
	if g == nil {
		return nil
	}
	c := *g
	c.Approvers = append([]string(nil), g.Approvers...)
	c.Arguments, c.Metadata = clone(g.Arguments), clone(g.Metadata)
	return &c
}

// DecisionKind is what a decision asks for.
type DecisionKind string

// The decisions on a record awaiting approval.
const (
	DecisionApprove DecisionKind = "approve"
	DecisionDeny    DecisionKind = "deny"
	DecisionExpire  DecisionKind = "expire"
)

// MaxDecisionReason bounds Decision.Reason.
const MaxDecisionReason = 1024

// Decision is a decision on a record awaiting approval (Store.Decide).
// Every field travels in the command, so that every replica decides alike.
type Decision struct {
	Kind DecisionKind `json:"kind"`
	// Actor is who decided: a principal, or for an expiry the node that
	// proposed it.
	Actor string `json:"actor,omitempty"`
	// Reason is the decider's word, kept on the record.
	Reason string `json:"reason,omitempty"`
	// At is when the decision was taken (stamped by the proposer): it is
	// compared with the gate's ExpiresAt.
	At time.Time `json:"at"`
	// NodeID is the node that will run an approved execution.
	NodeID string `json:"node_id,omitempty"`
}

// Validate reports whether d is well formed.
func (d Decision) Validate() error {
	switch {
	case d.Kind != DecisionApprove && d.Kind != DecisionDeny && d.Kind != DecisionExpire:
		return invalidf("decide: unknown decision %q", d.Kind)
	case d.At.IsZero():
		return invalidf("decide: no time")
	case d.Kind == DecisionApprove && d.NodeID == "":
		return invalidf("decide: an approval names the node that runs it")
	case !validName(d.Actor, MaxResolvedBy) || !validName(d.NodeID, MaxResolvedBy):
		return invalidf("decide: actor and node id: at most %d bytes of UTF-8 without NUL", MaxResolvedBy)
	case !validName(d.Reason, MaxDecisionReason):
		return invalidf("decide: reason: at most %d bytes of UTF-8 without NUL", MaxDecisionReason)
	}
	return nil
}

// Effect is what d does to rec, a record awaiting approval: the kind of
// decision recorded (approve, deny or expire; a decision at or after the
// gate's ExpiresAt records expire whatever it asked), and ok false when
// it does nothing (an expire before the gate expired). Every store
// decides with it.
func (d Decision) Effect(rec Record) (DecisionKind, bool) {
	if rec.Approval != nil && !d.At.Before(rec.Approval.ExpiresAt) {
		return DecisionExpire, true
	}
	if d.Kind == DecisionExpire {
		return "", false
	}
	return d.Kind, true
}

// DecisionRecord is the decision taken on a gated record, kept on it.
type DecisionRecord struct {
	// Status is the status the decision led to: running (approved),
	// denied or expired.
	Status Status `json:"status"`
	// By is who decided (Decision.Actor).
	By     string    `json:"by,omitempty"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// The codes of the error a denied or expired record holds (docs/errors.md).
const (
	CodeApprovalDenied  Code = "APPROVAL_DENIED"
	CodeApprovalExpired Code = "APPROVAL_EXPIRED"
)

// DecisionError returns the error object a denied or expired record
// holds, replayed to every retry.
func DecisionError(kind DecisionKind, reason string) json.RawMessage {
	body := struct {
		Code    Code   `json:"code"`
		Message string `json:"message"`
		Reason  string `json:"reason,omitempty"`
	}{Code: CodeApprovalDenied, Message: "the call was denied by an approver; the tool did not run", Reason: reason}
	if kind == DecisionExpire {
		body.Code, body.Message, body.Reason = CodeApprovalExpired, "no one approved the call before its approval expired; the tool did not run", ""
	}
	b, _ := json.Marshal(body)
	return b
}

// decided applies a decision of kind (Decision.Effect) to r, a record
// awaiting approval, with seq the new fencing token of an approval: the
// record as every store writes it.
func decided(r *Record, kind DecisionKind, d Decision, seq uint64) {
	dr := &DecisionRecord{By: d.Actor, Reason: d.Reason, At: d.At}
	switch kind {
	case DecisionApprove:
		r.Status, r.NodeID, r.Seq = StatusRunning, d.NodeID, seq
	case DecisionDeny:
		r.apply(Result{Status: StatusDenied, Error: DecisionError(kind, d.Reason), FinishedAt: d.At})
	default:
		r.apply(Result{Status: StatusExpired, Error: DecisionError(kind, ""), FinishedAt: d.At})
	}
	dr.Status = r.Status
	r.Decision = dr
}

// Decide implements Store.Decide with seq as an approved record's new Seq
// (its fencing token); seq must be greater than LastSeq when d approves.
func (s *State) Decide(executionID string, d Decision, seq uint64) (Record, error) {
	if err := d.Validate(); err != nil {
		return Record{}, err
	}
	r, err := s.open(executionID, string(d.Kind), Status.Awaiting)
	if err != nil {
		return Record{}, err
	}
	kind, ok := d.Effect(*r)
	if !ok {
		return Record{}, &StateError{Op: string(d.Kind), Record: *r}
	}
	if kind == DecisionApprove && seq <= s.lastSeq {
		return Record{}, invalidf("decide: seq %d not above %d", seq, s.lastSeq)
	}
	before := RecordSize(*r)
	decided(r, kind, d, seq)
	s.track(r)
	if kind == DecisionApprove {
		s.lastSeq = seq
	}
	s.account(r.Key.Principal, RecordSize(*r)-before)
	return *r, nil
}

func validName(s string, max int) bool {
	return len(s) <= max && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}
