package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// Complete implements store.Store: one statement that applies only while
// the record belongs to res.ExecutionID and is running or interrupted, in
// the next round of writes (rounds.go), whose transaction holds the meta
// row, so that the bytes it adds are checked against the counts every
// writer shares (store.Overflow; an outcome that does not fit is recorded
// as store.OverflowResult) and added to them. When it applies to nothing, the record is read to say
// why (store.ErrNotFound, a *store.ConflictError, a *store.StateError
// carrying the record as it stands).
//
// Errors: store.ErrCommitUnknown means the COMMIT was sent and its answer
// lost (the connection or the server went away, ctx ended): the result may
// or may not be recorded, and a retry of Complete tells which (it succeeds,
// or returns a *store.StateError with this execution's finished record);
// so does ctx ending while its round is in flight. store.ErrUnavailable
// means it was not recorded.
func (s *Store) Complete(ctx context.Context, key store.Key, fingerprint string, res store.Result) (store.Record, error) {
	if err := res.Validate(); err != nil {
		return store.Record{}, err
	}
	if !validKey(key) {
		return store.Record{}, store.ErrNotFound
	}
	if !validText(fingerprint) || !validText(res.ExecutionID) {
		return store.Record{}, invalidf("complete: the fingerprint and execution id must be valid UTF-8 without NUL")
	}
	out, err := s.rounds.complete(ctx, key, fingerprint, res, s.maxBytes.Load())
	if err != nil || out.applied {
		return out.rec, err
	}
	rec, err := s.Lookup(ctx, key)
	switch {
	case err != nil:
		return store.Record{}, err
	case rec.Fingerprint != fingerprint:
		return store.Record{}, &store.ConflictError{Record: rec}
	}
	return store.Record{}, &store.StateError{Op: "complete", Record: rec}
}

// Cancel implements store.Store: one conditional UPDATE in a transaction
// that holds the meta row, as Complete; the cancellation's bytes are
// counted whatever the bounds (they are few). The transaction notifies
// the store's cancel channel with the execution id, so that a Fleet whose
// node runs the tool cancels it when the cancellation commits.
func (s *Store) Cancel(ctx context.Context, executionID string, res store.Result) (store.Record, error) {
	if err := res.Validate(); err != nil {
		return store.Record{}, err
	}
	if res.Status != store.StatusCancelled || res.ExecutionID != executionID {
		return store.Record{}, invalidf("cancel: result must be cancelled for %s", executionID)
	}
	if !validText(executionID) {
		return store.Record{}, store.ErrNotFound
	}
	at := time.Now()
	rec, ok, err := s.settle(ctx, "cancel", func(tx pgx.Tx) (pgx.Rows, error) {
		return tx.Query(ctx, s.q.cancel, executionID, []byte(res.Data), []byte(res.Error), res.FinishedAt)
	}, func(tx pgx.Tx, _ store.Record) (error, error) {
		// Delivered at the commit, to every Fleet listening (the runner's
		// node cancels the tool); nothing when it rolls back.
		_, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", s.names.cancelChannel(), executionID)
		return nil, err
	}, func(rec store.Record) audit.Draft {
		return draftOf(audit.KindCancelled, rec, s.actor(ctx, rec.NodeID), at)
	})
	if err != nil || ok {
		return rec, err
	}
	return s.refused(ctx, "cancel", executionID)
}

// Resolve implements store.Store: one conditional UPDATE in a transaction
// that holds the meta row, as Complete; an outcome that does not fit
// (store.Overflow) rolls it back and is refused with a *store.QuotaError
// or *store.CapacityError.
func (s *Store) Resolve(ctx context.Context, executionID string, r store.Resolution) (store.Record, error) {
	if err := r.Validate(); err != nil {
		return store.Record{}, err
	}
	if (r.Status != store.StatusCompleted && r.Status != store.StatusFailed) || r.ExecutionID != executionID {
		return store.Record{}, invalidf("resolve: outcome must be completed or failed for %s", executionID)
	}
	if !validText(executionID) {
		return store.Record{}, store.ErrNotFound
	}
	at := time.Now()
	rec, ok, err := s.settle(ctx, "resolve", func(tx pgx.Tx) (pgx.Rows, error) {
		return tx.Query(ctx, s.q.resolve, executionID, string(r.Status), []byte(r.Data), []byte(r.Error), r.FinishedAt, r.AllowRunning, r.By)
	}, func(tx pgx.Tx, rec store.Record) (error, error) {
		// An outcome that does not fit is refused, as store.State does.
		storeBytes, principalBytes, err := s.bytesOf(ctx, tx, rec.Key.Principal)
		if err != nil {
			return nil, err
		}
		if over, limit, exceeded := store.Overflow(rec.Key.Principal, store.OutcomeSize(r.Result.Data, r.Result.Error), principalBytes, r.ByteQuota, storeBytes, s.maxBytes.Load()); exceeded {
			return store.OverflowError(over, limit), nil
		}
		return nil, nil
	}, func(rec store.Record) audit.Draft {
		actor := r.By
		if actor == "" {
			actor = s.actor(ctx, rec.NodeID)
		}
		return draftOf(audit.KindResolved, rec, actor, at)
	})
	if err != nil || ok {
		return rec, err
	}
	return s.refused(ctx, "resolve", executionID)
}

// Release implements store.Store. The record and the counters change in
// one transaction that holds the counter row, as reservations do.
func (s *Store) Release(ctx context.Context, executionID string, allowRunning bool) (store.Record, error) {
	if !validText(executionID) {
		return store.Record{}, store.ErrNotFound
	}
	var (
		rec store.Record
		ok  bool
	)
	at := time.Now()
	err := s.inTx(ctx, "release", func(tx pgx.Tx) (commit bool, err error) {
		rows, err := tx.Query(ctx, s.q.release, executionID, allowRunning)
		if err != nil {
			return false, err
		}
		rec, err = pgx.CollectExactlyOneRow(rows, scanRecord)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		d := draftOf(audit.KindReleased, rec, s.actor(ctx, rec.NodeID), at)
		d.Status = string(audit.KindReleased)
		if err := s.appendAudit(ctx, tx, []audit.Draft{d}); err != nil {
			return false, err
		}
		ok = true
		return true, nil
	})
	if err != nil || ok {
		return rec, err
	}
	return s.refused(ctx, "release", executionID)
}

// MarkInterrupted implements store.Store: one UPDATE and the audit entry
// of every record it marked, in one transaction. An error matching
// store.ErrCommitUnknown means some or all may have been marked; the call
// is idempotent, so the caller retries it.
func (s *Store) MarkInterrupted(ctx context.Context, nodeID string) (int, error) {
	if !validText(nodeID) {
		return 0, nil
	}
	recs, err := s.interrupt(ctx, "mark interrupted", s.actor(ctx, nodeID), s.q.markInterrupted, nodeID)
	return len(recs), err
}

// interrupt runs sql, an UPDATE that marks records interrupted and returns
// them (recordColumns), and appends their audit entries, by actor, in
// seq order, in one transaction; it returns the records marked. Errors
// before the COMMIT mean nothing was marked; at the COMMIT, atCommit's.
func (s *Store) interrupt(ctx context.Context, op, actor, sql string, args ...any) ([]store.Record, error) {
	at := time.Now()
	tx, err := s.pool.BeginTx(ctx, readCommitted)
	if err != nil {
		return nil, notApplied(op, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, notApplied(op, err)
	}
	recs, err := pgx.CollectRows(rows, scanRecord)
	if err != nil {
		return nil, notApplied(op, err)
	}
	if len(recs) == 0 {
		return nil, nil
	}
	slices.SortFunc(recs, func(a, b store.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	drafts := make([]audit.Draft, len(recs))
	for i, rec := range recs {
		drafts[i] = draftOf(audit.KindInterrupted, rec, actor, at)
	}
	if err := s.appendAudit(ctx, tx, drafts); err != nil {
		return nil, notApplied(op, err)
	}
	err = tx.Commit(ctx)
	s.committedDecision()
	if err != nil {
		return nil, atCommit(op, err)
	}
	return recs, nil
}

// Expire implements store.Expirer: it removes the finished records that
// finished before cutoff (to the microsecond, PostgreSQL's precision) in
// one transaction holding the counter row, and forgets principals left
// with no record. Running and interrupted records are never removed.
func (s *Store) Expire(ctx context.Context, cutoff time.Time) (int, error) {
	var n int64
	err := s.inTx(ctx, "expire", func(tx pgx.Tx) (bool, error) {
		if err := tx.QueryRow(ctx, s.q.expire, cutoff).Scan(&n); err != nil {
			return false, err
		}
		if n == 0 {
			return false, nil
		}
		_, err := tx.Exec(ctx, s.q.prunePrincipals)
		return err == nil, err
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// bytesOf reads the store's bytes and principal's, in a transaction that
// holds the meta row (every writer of the counts does).
func (s *Store) bytesOf(ctx context.Context, tx pgx.Tx, principal string) (storeBytes, principalBytes int64, err error) {
	err = tx.QueryRow(ctx, s.q.bytesOf, principal).Scan(&storeBytes, &principalBytes)
	return storeBytes, principalBytes, err
}

// settle records an outcome: write, a conditional UPDATE returning at most
// one record, runs in a transaction that holds the meta row (inTx). When
// it applied, check (when not nil) may refuse it: the transaction rolls
// back and settle returns the refusal as its error. Otherwise the
// outcome's bytes are added to the store's and the record principal's,
// its audit entry (entry of the record) is appended, and the transaction
// commits. ok is false, with no error, when write
// applied to nothing: the caller reads the record to say why.
//
// Errors: as inTx's. An error before COMMIT means nothing was recorded;
// store.ErrCommitUnknown means the COMMIT was sent and its answer lost.
func (s *Store) settle(ctx context.Context, op string, write func(pgx.Tx) (pgx.Rows, error),
	check func(pgx.Tx, store.Record) (refusal, err error), entry func(store.Record) audit.Draft) (rec store.Record, ok bool, err error) {
	var refusal error
	err = s.inTx(ctx, op, func(tx pgx.Tx) (bool, error) {
		rows, err := write(tx)
		if err != nil {
			return false, err
		}
		rec, err = pgx.CollectExactlyOneRow(rows, scanRecord)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return false, nil
		case err != nil:
			return false, err
		}
		if check != nil {
			if refusal, err = check(tx, rec); err != nil || refusal != nil {
				return false, err
			}
		}
		if _, err := tx.Exec(ctx, s.q.addBytes, rec.Key.Principal, store.OutcomeSize(rec.Data, rec.Error)); err != nil {
			return false, err
		}
		if err := s.appendAudit(ctx, tx, []audit.Draft{entry(rec)}); err != nil {
			return false, err
		}
		ok = true
		return true, nil
	})
	switch {
	case err != nil:
		return store.Record{}, false, err
	case refusal != nil:
		return store.Record{}, false, refusal
	}
	return rec, ok, nil
}

// readCommitted is the isolation of every transaction of the store, set
// explicitly so that a server or role whose default is REPEATABLE READ or
// SERIALIZABLE does not change it: statements that follow a lock must see
// what committed while the lock was awaited, which only READ COMMITTED's
// statement snapshots do.
var readCommitted = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

// inTx runs fn in a READ COMMITTED transaction that first holds the
// counter row and folds every lease into the counts, and commits when fn says so (else rolls back). Errors of fn
// and of BEGIN mean nothing was applied; an error of COMMIT is sorted by
// atCommit.
func (s *Store) inTx(ctx context.Context, op string, fn func(pgx.Tx) (commit bool, err error)) error {
	tx, err := s.pool.BeginTx(ctx, readCommitted)
	if err != nil {
		return notApplied(op, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, s.q.lockMeta); err != nil {
		return notApplied(op, err)
	}
	// Every lease back into the counts, which are then the records'
	// (leases.go): what fn checks against them is exact.
	if _, err := tx.Exec(ctx, s.q.lockAllLeases); err != nil {
		return notApplied(op, err)
	}
	if _, err := tx.Exec(ctx, s.q.fold); err != nil {
		return notApplied(op, err)
	}
	commit, err := fn(tx)
	if err != nil {
		return notApplied(op, err)
	}
	if !commit {
		return nil
	}
	// Most of what commits here queued audit drafts (a fold or an expiry
	// did not, and costs a background pass that finds nothing).
	err = tx.Commit(ctx)
	s.committedDecision()
	if err != nil {
		return atCommit(op, err)
	}
	return nil
}

// refused explains a conditional write that applied to nothing:
// store.ErrNotFound, or a *store.StateError with the record as it stands.
func (s *Store) refused(ctx context.Context, op, executionID string) (store.Record, error) {
	rec, err := s.Get(ctx, executionID)
	if err != nil {
		return store.Record{}, err
	}
	return store.Record{}, &store.StateError{Op: op, Record: rec}
}

// finishedAt is the finish time a result sets: none (NULL) for an
// interrupted one, which stays open.
func finishedAt(res store.Result) *time.Time {
	if res.FinishedAt.IsZero() {
		return nil
	}
	return &res.FinishedAt
}
