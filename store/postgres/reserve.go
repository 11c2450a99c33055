package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/carmyhq/carmy/store"
)

// maxReserveRounds bounds how often Reserve starts over when the identity
// it found held is released before it could read the holder's record.
const maxReserveRounds = 8

// Reserve implements store.Store.
//
// A held identity is answered from its record, read without a lock
// (replay, conflict, uncertain). A vacant one is reserved by one statement
// in a READ COMMITTED transaction that first takes the store-wide counter
// row: the count is compared with Capacity and the next Seq taken under
// its row lock, the record inserted with ON CONFLICT DO NOTHING (so of
// concurrent reservers of one identity exactly one inserts; the others
// wait for its commit and find the identity held), and the principal's
// counter incremented under its quota. When a bound is reached nothing is
// committed. See the package documentation for why.
//
// Errors: store.ErrCapacity, a *store.QuotaError or store.ErrInvalid mean
// nothing was reserved; store.ErrUnavailable means nothing was reserved;
// store.ErrCommitUnknown means the reservation may have been made.
func (s *Store) Reserve(ctx context.Context, key store.Key, fingerprint string, exec store.Execution) (store.Reservation, error) {
	if err := s.checkReserve(key, fingerprint, exec); err != nil {
		return store.Reservation{}, err
	}
	for range maxReserveRounds {
		rec, err := s.Lookup(ctx, key)
		switch {
		case err == nil:
			return answer(rec, fingerprint), nil
		case !errors.Is(err, store.ErrNotFound):
			return store.Reservation{}, err
		}
		res, again, err := s.insert(ctx, key, fingerprint, exec)
		if !again {
			return res, err
		}
	}
	return store.Reservation{}, fmt.Errorf("postgres: reserve %s: %w: the identity was taken and released %d times in a row",
		key, store.ErrUnavailable, maxReserveRounds)
}

func (s *Store) checkReserve(key store.Key, fingerprint string, exec store.Execution) error {
	switch {
	case key.RequestID == "":
		return invalidf("reserve: empty request_id")
	case fingerprint == "":
		return invalidf("reserve: empty fingerprint")
	case exec.ID == "":
		return invalidf("reserve: empty execution id")
	case exec.Quota < 0:
		return invalidf("reserve: negative quota %d", exec.Quota)
	case !validKey(key) || !validText(fingerprint) || !validText(exec.ID) || !validText(exec.Tool) || !validText(exec.NodeID):
		return invalidf("reserve: the key, fingerprint, execution id, tool and node id must be valid UTF-8 without NUL")
	}
	return nil
}

// answer is Reserve's answer for an identity that rec holds.
func answer(rec store.Record, fingerprint string) store.Reservation {
	switch {
	case rec.Fingerprint != fingerprint:
		return store.Reservation{Outcome: store.Conflict, Record: rec}
	case rec.Status.Finished():
		return store.Reservation{Outcome: store.Replay, Record: rec}
	default:
		return store.Reservation{Outcome: store.Uncertain, Record: rec}
	}
}

// insert tries to reserve a vacant identity. again is true when the
// identity turned out held, and released before its record could be read:
// Reserve then starts over.
func (s *Store) insert(ctx context.Context, key store.Key, fingerprint string, exec store.Execution) (res store.Reservation, again bool, err error) {
	tx, err := s.pool.BeginTx(ctx, readCommitted)
	if err != nil {
		return res, false, notApplied("reserve", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var (
		seq       *int64
		startedAt *time.Time
		counted   *int64
	)
	err = tx.QueryRow(ctx, s.q.reserve, s.cfg.Capacity, key.Principal, key.Session, key.RequestID,
		exec.ID, exec.Tool, fingerprint, exec.NodeID, exec.StartedAt, exec.Quota).Scan(&seq, &startedAt, &counted)
	switch {
	case isUniqueViolation(err, s.names.prefix+"rec_exec"):
		return res, false, invalidf("reserve: execution id %s already in use", exec.ID)
	case err != nil:
		return res, false, notApplied("reserve", err)
	case seq == nil || startedAt == nil:
		// Full, or the identity was reserved since Reserve looked: either
		// way nothing was written. A held identity is answered whatever
		// the bounds; a vacant one of a full store is refused.
		_ = tx.Rollback(ctx)
		rec, err := s.Lookup(ctx, key)
		switch {
		case err == nil:
			return answer(rec, fingerprint), false, nil
		case !errors.Is(err, store.ErrNotFound):
			return res, false, err
		case seq == nil:
			return res, false, store.ErrCapacity
		}
		return res, true, nil
	case counted == nil:
		return res, false, &store.QuotaError{Principal: key.Principal, Quota: exec.Quota}
	}
	if err := tx.Commit(ctx); err != nil {
		return res, false, atCommit("reserve", err)
	}
	return store.Reservation{Outcome: store.Reserved, Record: store.Record{
		ExecutionID: exec.ID,
		Key:         key,
		Tool:        exec.Tool,
		Fingerprint: fingerprint,
		Status:      store.StatusRunning,
		NodeID:      exec.NodeID,
		StartedAt:   startedAt.UTC(),
		Seq:         uint64(*seq),
	}}, false, nil
}
