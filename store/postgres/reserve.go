package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store"
)

// Reserve implements store.Store.
//
// A reservation joins the next round (see rounds.go), after a read of its
// identity only while most recent ones found theirs held (reserve_path.go;
// a held identity is then answered from the read): one READ
// COMMITTED transaction whose statement for all its reservations
// (reserveAll, rounds_set.go) answers a held identity from its record
// (replay, conflict, uncertain) and reserves the vacant ones, deciding
// against the current state under the meta row's lock, which a round
// takes only when one of its identities is vacant (a round of replays
// locks nothing). When that statement does not apply (a bound reached, an
// execution id in use, a record past its dedupe window), one statement per
// reservation decides each in turn, and either inserts the record and
// counts it, or writes nothing and says why. Of concurrent reservers of
// one identity, in this process or others, exactly one inserts; the others
// find the identity held and are answered from its record.
//
// Errors: store.ErrCapacity, a *store.QuotaError or store.ErrInvalid mean
// nothing was reserved, and so does store.ErrUnavailable;
// store.ErrCommitUnknown means the reservation may have been made (its
// COMMIT was sent and not answered, or ctx ended while its round was in
// flight): the caller finds out with Lookup, or releases it.
func (s *Store) Reserve(ctx context.Context, key store.Key, fingerprint string, exec store.Execution) (store.Reservation, error) {
	if err := checkReserve(key, fingerprint, exec); err != nil {
		return store.Reservation{}, err
	}
	if exec.Approval != nil {
		return s.reserveGated(ctx, key, fingerprint, exec)
	}
	if s.held.readFirst() {
		rec, err := s.Lookup(ctx, key)
		switch {
		case err == nil && exec.Held(rec, fingerprint) != store.Reserved:
			s.held.observe(true)
			return answer(rec, fingerprint), nil
		case err == nil:
			// Past the dedupe window, or uncertain under RetryUncertain:
			// the round's statement decides, under the lock, whether it
			// replaces the record.
		case !errors.Is(err, store.ErrNotFound):
			return store.Reservation{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return store.Reservation{}, notApplied("reserve", err)
	}
	res, err := s.rounds.submit(ctx, &reservation{key: key, fingerprint: fingerprint, exec: exec, maxBytes: s.maxBytes.Load()})
	if err == nil {
		s.held.observe(res.Outcome != store.Reserved)
	}
	return res, err
}

func checkReserve(key store.Key, fingerprint string, exec store.Execution) error {
	switch {
	case key.RequestID == "":
		return invalidf("reserve: empty request_id")
	case fingerprint == "":
		return invalidf("reserve: empty fingerprint")
	case !validKey(key) || !validText(fingerprint) || !validText(exec.ID) || !validText(exec.Tool) || !validText(exec.NodeID):
		return invalidf("reserve: the key, fingerprint, execution id, tool and node id must be valid UTF-8 without NUL")
	}
	return exec.Validate()
}

// answer is Reserve's answer for an identity that rec holds.
func answer(rec store.Record, fingerprint string) store.Reservation {
	switch {
	case rec.Fingerprint != fingerprint:
		return store.Reservation{Outcome: store.Conflict, Record: rec}
	case rec.Status.Finished():
		return store.Reservation{Outcome: store.Replay, Record: rec}
	case rec.Status.Awaiting():
		return store.Reservation{Outcome: store.Awaiting, Record: rec}
	default:
		return store.Reservation{Outcome: store.Uncertain, Record: rec}
	}
}

// reserveRow is the row of queries.reserve.
type reserveRow struct {
	freshID, room, underQuota, roomBytes, underByteQuota bool
	// stale: the identity's record is finished and past the dedupe window,
	// or timed_out or interrupted under RetryUncertain, so the reservation
	// replaces it when the bounds on bytes allow.
	stale bool
	// seq and startedAt are set when the statement reserved.
	seq       *int64
	startedAt *time.Time
	// The held record, when the identity is held (executionID != nil).
	executionID, tool, fingerprint, status, nodeID *string
	heldSeq                                        *int64
	heldStarted, heldFinished                      *time.Time
	data, errBody                                  []byte
	resolved                                       *bool
	resolvedBy                                     *string
	gate                                           gateCols
}

func (r *reserveRow) scan(row pgx.Row) error {
	return row.Scan(append([]any{&r.freshID, &r.room, &r.underQuota, &r.roomBytes, &r.underByteQuota, &r.stale, &r.seq, &r.startedAt,
		&r.executionID, &r.heldSeq, &r.tool, &r.fingerprint, &r.status, &r.nodeID, &r.heldStarted,
		&r.heldFinished, &r.data, &r.errBody, &r.resolved, &r.resolvedBy}, r.gate.dest()...)...)
}

// held returns the identity's record, when the statement found it held.
func (r *reserveRow) held(key store.Key) (store.Record, bool) {
	if r.executionID == nil {
		return store.Record{}, false
	}
	rec := store.Record{
		ExecutionID: *r.executionID, Key: key, Tool: *r.tool, Fingerprint: *r.fingerprint,
		Status: store.Status(*r.status), NodeID: *r.nodeID, StartedAt: r.heldStarted.UTC(),
		Resolved: *r.resolved, Seq: uint64(*r.heldSeq),
	}
	if r.resolvedBy != nil {
		rec.ResolvedBy = *r.resolvedBy
	}
	if r.heldFinished != nil {
		rec.FinishedAt = r.heldFinished.UTC()
	}
	if r.data != nil {
		rec.Data = r.data
	}
	if r.errBody != nil {
		rec.Error = r.errBody
	}
	r.gate.fill(&rec)
	return rec, true
}

// decision is what one reservation's statement decided.
type decision int

const (
	decidedAnswer   decision = iota // held: answered from the record; final whatever the round's commit
	decidedReserved                 // reserved, if the round commits
	decidedRefused                  // refused by a bound, which earlier reservations of the round may have filled
)

// decide reads the statement's row for it.
func decide(it *reservation, row *reserveRow) (reserveResult, decision) {
	// Reserved first: a reservation that replaced an expired record (its
	// dedupe window) also finds the identity held.
	rec, held := row.held(it.key)
	switch {
	case row.seq == nil && held && row.stale && !row.freshID:
		// An expired record, to be replaced under an execution id in
		// use: refused, as store.State refuses it.
		return reserveResult{err: invalidf("reserve: execution id %s already in use", it.exec.ID)}, decidedAnswer
	case row.seq == nil && held && row.stale && (!row.roomBytes || !row.underByteQuota):
		// An expired record whose replacement does not fit: refused, as
		// store.State refuses it, the old record left in place.
		if !row.roomBytes {
			return reserveResult{err: &store.CapacityError{Resource: store.ResourceBytes, Limit: it.maxBytes}}, decidedRefused
		}
		return reserveResult{err: &store.QuotaError{Principal: it.key.Principal, Quota: it.exec.Quota, Bytes: it.exec.ByteQuota}}, decidedRefused
	case row.seq == nil && held:
		return reserveResult{res: answer(rec, it.fingerprint)}, decidedAnswer
	case row.seq != nil:
		return reserveResult{res: store.Reservation{Outcome: store.Reserved, Record: reservedRecord(it, *row.seq, *row.startedAt)}}, decidedReserved
	case !row.freshID:
		return reserveResult{err: invalidf("reserve: execution id %s already in use", it.exec.ID)}, decidedAnswer
	case !row.room:
		return reserveResult{err: store.ErrCapacity}, decidedRefused
	case !row.underQuota:
		return reserveResult{err: &store.QuotaError{Principal: it.key.Principal, Quota: it.exec.Quota}}, decidedRefused
	case !row.roomBytes:
		return reserveResult{err: &store.CapacityError{Resource: store.ResourceBytes, Limit: it.maxBytes}}, decidedRefused
	case !row.underByteQuota:
		return reserveResult{err: &store.QuotaError{Principal: it.key.Principal, Quota: it.exec.Quota, Bytes: it.exec.ByteQuota}}, decidedRefused
	}
	// Vacant, within bounds, and yet not inserted: a row was inserted
	// without the meta row's lock, by something other than this package.
	return reserveResult{err: notApplied("reserve", fmt.Errorf("the identity %s was inserted outside the store", it.key))}, decidedAnswer
}

// reservedRecord is the record it reserved, with seq, started at started:
// running, or awaiting approval behind its gate.
func reservedRecord(it *reservation, seq int64, started time.Time) store.Record {
	rec := store.Record{
		ExecutionID: it.exec.ID, Key: it.key, Tool: it.exec.Tool, Fingerprint: it.fingerprint,
		Status: store.StatusRunning, NodeID: it.exec.NodeID, StartedAt: started.UTC(), Seq: uint64(seq),
	}
	if g := it.exec.Approval; g != nil {
		rec.Status, rec.Approval = store.StatusAwaitingApproval, storedGate(g)
	}
	return rec
}
