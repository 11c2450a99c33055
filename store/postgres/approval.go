package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// Approval gates (docs/policy.md#approval-gates) in the tables (schema
// version 8). A gated reservation (store.Execution.Approval) is one
// transaction of its own, not a member of a round: it takes the meta row
// and folds every lease into the counts (inTx), so it decides against the
// records exactly, as a round's member under the meta row does, with the
// same statement (queries.reserve, whose gate arguments make the record
// awaiting_approval), and appends its reserved entry. Gated calls wait
// for a person; their reservations are few, and a retry of one is
// answered from a read of its record (Lookup), which takes no lock. The
// fold is their cost to the others, as a cancel's or a resolve's is: each
// Store's next round takes the meta row once to refill its leases.
//
// A decision (Decide) is one transaction under the meta row too: it
// reads the record (FOR UPDATE), decides with store.Decision.Effect, and
// writes with an UPDATE that applies only while the record is
// awaiting_approval; an approval gives the record a new seq from the
// sequence (its fencing token, above every seq given before) and the
// approving node. The record's change of size (an approval's node id, a
// denial's or an expiry's error) is added to the bytes, and the entry of
// the decision (approved, denied or expired) appended, before the commit.
// Concurrent decisions on one record, from any number of processes, take
// the meta row one after the other: the first that finds the record
// awaiting decides it, and every other finds it decided and is refused
// with a *store.StateError carrying it.
//
// Nothing else writes an awaiting record: completions, cancels, resolves
// and releases apply to running or interrupted records only, and a dead
// node's sweep (and MarkInterrupted) to running ones; an approved record
// is running on the approving node, whose death interrupts it.

// gateColumns are the gate's and the decision's columns, read after the
// others of recordColumns (gateCols.dest's order).
const gateColumns = `approvers, expires_at, arguments, metadata, decision_status, decided_by, decided_reason, decided_at`

// gateCols receives a row's gateColumns.
type gateCols struct {
	approvers           []string
	expiresAt           *time.Time
	arguments, metadata []byte
	status, by, reason  *string
	decidedAt           *time.Time
}

// dest are the scan destinations of gateColumns.
func (g *gateCols) dest() []any {
	return []any{&g.approvers, &g.expiresAt, &g.arguments, &g.metadata, &g.status, &g.by, &g.reason, &g.decidedAt}
}

// fill sets r's Approval (when the row has a gate: expires_at is set) and
// Decision (when decision_status is).
func (g *gateCols) fill(r *store.Record) {
	if g.expiresAt != nil {
		r.Approval = &store.ApprovalGate{ExpiresAt: g.expiresAt.UTC()}
		if len(g.approvers) > 0 {
			r.Approval.Approvers = g.approvers
		}
		if g.arguments != nil {
			r.Approval.Arguments = g.arguments
		}
		if g.metadata != nil {
			r.Approval.Metadata = g.metadata
		}
	}
	if g.status != nil {
		r.Decision = &store.DecisionRecord{Status: store.Status(*g.status), By: deref(g.by), Reason: deref(g.reason)}
		if g.decidedAt != nil {
			r.Decision.At = g.decidedAt.UTC()
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// storedGate is g as the tables keep it: its times to the microsecond
// (PostgreSQL's precision; pgx truncates), in UTC.
func storedGate(g *store.ApprovalGate) *store.ApprovalGate {
	c := *g
	if len(g.Approvers) == 0 {
		c.Approvers = nil
	} else {
		c.Approvers = append([]string(nil), g.Approvers...)
	}
	c.ExpiresAt = g.ExpiresAt.Truncate(time.Microsecond).UTC()
	c.Arguments = cloneBytes(g.Arguments)
	c.Metadata = cloneBytes(g.Metadata)
	return &c
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// reserveGated reserves a gated execution (see above): a held identity is
// answered from a read of its record; otherwise one transaction under the
// meta row decides with queries.reserve, as a round's member does, and
// appends the reserved entry (status awaiting_approval). Errors: as
// Reserve's.
func (s *Store) reserveGated(ctx context.Context, key store.Key, fingerprint string, exec store.Execution) (store.Reservation, error) {
	rec, err := s.Lookup(ctx, key)
	switch {
	case err == nil && exec.Held(rec, fingerprint) != store.Reserved:
		return answer(rec, fingerprint), nil
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return store.Reservation{}, err
	}
	it := &reservation{pending: pending{ctx: ctx, at: time.Now()}, key: key, fingerprint: fingerprint, exec: exec, maxBytes: s.maxBytes.Load()}
	var out reserveResult
	err = s.inTx(ctx, "reserve", func(tx pgx.Tx) (bool, error) {
		var row reserveRow
		if err := row.scan(tx.QueryRow(ctx, s.q.reserve, s.reserveOneArgs(it)...)); err != nil {
			return false, err
		}
		var kind decision
		out, kind = decide(it, &row)
		if kind != decidedReserved {
			return false, nil
		}
		if err := s.appendAudit(ctx, tx, []audit.Draft{reservedDraft(it, out.res.Record)}); err != nil {
			return false, err
		}
		return true, nil
	})
	if err != nil {
		return store.Reservation{}, err
	}
	return out.res, out.err
}

// Decide implements store.Store (see above). It returns store.ErrNotFound
// for an execution the store does not hold, and a *store.StateError with
// the record as it stands when the record is not awaiting approval, or
// the decision does nothing (an expiry before the gate expires).
//
// Errors: store.ErrCommitUnknown means the COMMIT was sent and its answer
// lost: the decision may or may not be recorded, and Get tells which.
// store.ErrUnavailable means it was not recorded.
func (s *Store) Decide(ctx context.Context, executionID string, d store.Decision) (store.Record, error) {
	if err := d.Validate(); err != nil {
		return store.Record{}, err
	}
	if !validText(executionID) {
		return store.Record{}, store.ErrNotFound
	}
	at := time.Now()
	var (
		rec     store.Record
		refusal error
	)
	err := s.inTx(ctx, string(d.Kind), func(tx pgx.Tx) (bool, error) {
		rows, err := tx.Query(ctx, s.q.getForUpdate, executionID)
		if err != nil {
			return false, err
		}
		cur, err := pgx.CollectExactlyOneRow(rows, scanRecord)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			refusal = store.ErrNotFound
			return false, nil
		case err != nil:
			return false, err
		}
		kind, ok := d.Effect(cur)
		if !cur.Status.Awaiting() || !ok {
			refusal = &store.StateError{Op: string(d.Kind), Record: cur}
			return false, nil
		}
		status, nodeID, errBody, finished := decisionOutcome(cur, kind, d)
		rows, err = tx.Query(ctx, s.q.decide, executionID, string(status), nodeID, kind == store.DecisionApprove,
			[]byte(errBody), finished, d.Actor, d.Reason, d.At)
		if err != nil {
			return false, err
		}
		rec, err = pgx.CollectExactlyOneRow(rows, scanRecord)
		if err != nil {
			// The row is locked and was awaiting: the UPDATE applies.
			return false, fmt.Errorf("decide: the awaiting record was not updated: %w", err)
		}
		if _, err := tx.Exec(ctx, s.q.addBytes, rec.Key.Principal, store.RecordSize(rec)-store.RecordSize(cur)); err != nil {
			return false, err
		}
		actor := d.Actor
		if actor == "" {
			actor = s.actor(ctx, cur.NodeID)
		}
		if err := s.appendAudit(ctx, tx, []audit.Draft{draftOf(decisionKind(rec.Status), rec, actor, at)}); err != nil {
			return false, err
		}
		return true, nil
	})
	switch {
	case err != nil:
		return store.Record{}, err
	case refusal != nil:
		return store.Record{}, refusal
	}
	return rec, nil
}

// decisionOutcome is what a decision of kind (store.Decision.Effect)
// makes of rec, as every store records it: an approval runs it on
// d.NodeID; a denial or an expiry finishes it at d.At with the error
// store.DecisionError says (finished is nil for an approval).
func decisionOutcome(rec store.Record, kind store.DecisionKind, d store.Decision) (status store.Status, nodeID string, errBody []byte, finished *time.Time) {
	switch kind {
	case store.DecisionApprove:
		return store.StatusRunning, d.NodeID, nil, nil
	case store.DecisionDeny:
		return store.StatusDenied, rec.NodeID, store.DecisionError(kind, d.Reason), &d.At
	}
	return store.StatusExpired, rec.NodeID, store.DecisionError(kind, ""), &d.At
}

// decisionKind is the ledger's kind of a decision that left a record in
// status st (as the Raft ledger names it).
func decisionKind(st store.Status) audit.Kind {
	switch st {
	case store.StatusRunning:
		return audit.KindApproved
	case store.StatusDenied:
		return audit.KindDenied
	}
	return audit.KindExpired
}
