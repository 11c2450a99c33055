package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store/audit"
)

// The chainer (ledger.go, Order): it moves the drafts that deciding
// transactions queued in audit_queue onto the chain. A pass is one
// transaction that locks the head row, deletes up to chainBatch queued
// rows (the oldest ids first) and, in id order, links their drafts after
// the head, inserts the entries and moves the head. A queued row is
// deleted in the transaction that chains it, so each draft is chained
// exactly once; a pass that fails rolls back whole and leaves the queue as
// it found it. Rows of transactions that have not committed are not seen,
// and a later pass chains them.
//
// When it runs:
//   - before every read of the chain through the Store (AuditHead,
//     AuditCheckpoint, AuditExport, PruneAudit, SignAudit), waiting for
//     the head row, so that a reader sees every decision committed before
//     its call;
//   - in the background, every Config.LedgerChainEvery, when this Store
//     committed a decision since its last pass; such a pass takes the
//     head row only if it is free (SKIP LOCKED): a node that finds it
//     taken leaves the drafts to whoever holds it and tries again on its
//     next tick, so nodes never queue on the head row;
//   - once at Close, for at most closeChainTimeout.
//
// A node of schema version 8 (which appends its entries directly, under
// the head row, in its deciding transaction) may run beside nodes of this
// version, which queue: both extend the head only while they hold its row
// lock, reading it after the lock is granted, so the chain stays one line
// with dense seqs whoever extends it.

// DefaultLedgerChainEvery is how often a Store chains, in the background,
// the drafts it queued, unless Config.LedgerChainEvery says otherwise.
const DefaultLedgerChainEvery = 100 * time.Millisecond

// chainBatch bounds the queued rows (one per deciding transaction) one
// pass chains, so that a pass's memory and duration stay bounded.
const chainBatch = 1000

// chainTickPasses bounds the passes of one background tick (a queue that
// keeps more waiting is taken on at the next tick).
const chainTickPasses = 10

// chainPassTimeout bounds a background tick's passes; closeChainTimeout
// the passes of Close.
const (
	chainPassTimeout  = 30 * time.Second
	closeChainTimeout = 2 * time.Second
)

// chainState is a Store's part in the chaining.
type chainState struct {
	// dirty says that this Store committed a transaction that may have
	// queued drafts since its last background pass began.
	dirty atomic.Bool
	// done is closed when the background loop has returned (nil: none
	// was started).
	done chan struct{}
	// failing says that the last background pass failed (logged once a
	// streak).
	failing bool
}

// chainQueries are the chainer's statements.
type chainQueries struct {
	enqueue, lockHeadFree, lastQueued, dequeue string
}

func newChainQueries(n names) chainQueries {
	x := n.expand
	return chainQueries{
		enqueue:      x(`INSERT INTO {audit_queue} (drafts) VALUES ($1::bytea[])`),
		lockHeadFree: x(`SELECT seq, hash FROM {audit_head} WHERE singleton FOR UPDATE SKIP LOCKED`),
		lastQueued:   x(`SELECT coalesce(max(id), 0) FROM {audit_queue}`),
		// $1 the most rows; only the holder of the head row runs it.
		dequeue: x(`WITH d AS (
	DELETE FROM {audit_queue} WHERE id IN (SELECT id FROM {audit_queue} ORDER BY id LIMIT $1) RETURNING id, drafts
)
SELECT id, drafts FROM d ORDER BY id`),
	}
}

// encodeDraft is how a draft waits in the queue: its canonical JSON
// (audit.Entry.Canonical, with no seq, prev_hash or hash yet), cleaned
// first so that it reads back as it was (its time to the nanosecond).
func encodeDraft(d audit.Draft) []byte {
	d = audit.Clean(d)
	return d.Canonical(nil)
}

// decodeDraft reads back a draft of encodeDraft.
func decodeDraft(b []byte) (audit.Draft, error) {
	var d audit.Draft
	if err := json.Unmarshal(b, &d); err != nil {
		return audit.Draft{}, err
	}
	return d, nil
}

// committedDecision notes that this Store committed (or may have) a
// transaction that queued drafts, for the background loop's next tick. It
// is called after the COMMIT, whatever its answer: a flag set before it
// could be taken by a pass that runs before the commit, and the drafts
// would wait for the next read.
func (s *Store) committedDecision() {
	if !s.cfg.NoLedger && s.chain.done != nil {
		s.chain.dirty.Store(true)
	}
}

// chainQueued chains every draft committed before the call, for a reader:
// a cheap look first, then passes that wait for the head row, until they
// passed the last row queued when it looked (so that a reader is not kept
// chaining forever by the decisions that commit after its call). Its
// error matches store.ErrUnavailable.
func (s *Store) chainQueued(ctx context.Context) error {
	var last int64
	if err := s.pool.QueryRow(ctx, s.cq.lastQueued).Scan(&last); err != nil {
		return readErr("audit chain", err)
	}
	if last == 0 {
		// Nothing committed before this statement waits: a pass that
		// took a draft committed its entries with the deletion.
		return nil
	}
	if _, _, err := s.chainAll(ctx, true, last, 0); err != nil {
		return readErr("audit chain", err)
	}
	return nil
}

// chainAll runs passes until one finds fewer than chainBatch rows,
// chained the row upTo or a later one (upTo 0: no such bound), or passes
// of them ran (0: no such bound); more says the last one found a full
// batch, so that more may wait. With wait false it takes the head row
// only if free, and reports busy (having chained nothing more) when
// another transaction holds it.
func (s *Store) chainAll(ctx context.Context, wait bool, upTo int64, passes int) (busy, more bool, err error) {
	for i := 1; ; i++ {
		n, last, busy, err := s.chainPass(ctx, wait)
		more = n == chainBatch
		if err != nil || busy || !more || (upTo > 0 && last >= upTo) || i == passes {
			return busy, more, err
		}
	}
}

// chainPass is one pass: it returns how many queued rows it chained and
// the last one's id, or busy when wait is false and the head row is taken.
func (s *Store) chainPass(ctx context.Context, wait bool) (rowsChained int, lastID int64, busy bool, err error) {
	tx, err := s.pool.BeginTx(ctx, readCommitted)
	if err != nil {
		return 0, 0, false, fmt.Errorf("audit chain: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	lock := s.lq.lockHead
	if !wait {
		lock = s.cq.lockHeadFree
	}
	var (
		seq  int64
		head audit.Head
	)
	switch err := tx.QueryRow(ctx, lock).Scan(&seq, &head.Hash); {
	case !wait && errors.Is(err, pgx.ErrNoRows):
		return 0, 0, true, nil
	case err != nil:
		return 0, 0, false, fmt.Errorf("audit chain: head: %w", err)
	}
	head.Seq = uint64(seq)
	rows, err := tx.Query(ctx, s.cq.dequeue, chainBatch)
	if err != nil {
		return 0, 0, false, fmt.Errorf("audit chain: dequeue: %w", err)
	}
	var (
		id     int64
		queued [][]byte
		drafts []audit.Draft
		n      int
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &queued}, func() error {
		n++
		for _, b := range queued {
			d, err := decodeDraft(b)
			if err != nil {
				return fmt.Errorf("queued row %d: %w", id, err)
			}
			drafts = append(drafts, d)
		}
		return nil
	})
	if err != nil {
		return 0, 0, false, fmt.Errorf("audit chain: dequeue: %w", err)
	}
	if n == 0 {
		return 0, 0, false, nil // the deferred rollback lets the head go
	}
	if _, err := s.extend(ctx, tx, head, drafts); err != nil {
		return 0, 0, false, fmt.Errorf("audit chain: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, 0, false, fmt.Errorf("audit chain: commit: %w", err)
	}
	return n, id, false, nil
}

// chainLoop chains, every every, what this Store committed since its last
// pass, until the Store closes.
func (s *Store) chainLoop(every time.Duration) {
	defer close(s.chain.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if !s.chain.dirty.Swap(false) {
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, chainPassTimeout)
		busy, more, err := s.chainAll(ctx, false, 0, chainTickPasses)
		cancel()
		if busy || err != nil || more {
			// Whoever holds the head may have read the queue before our
			// commit, or more is queued than a tick's passes took: look
			// again next tick.
			s.chain.dirty.Store(true)
		}
		switch {
		case err != nil && s.ctx.Err() == nil && !s.chain.failing:
			s.chain.failing = true
			s.cfg.Logger.Warn("postgres store: chaining the audit ledger failed; retrying", slog.Any("err", err))
		case err == nil && s.chain.failing:
			s.chain.failing = false
			s.cfg.Logger.Info("postgres store: chaining the audit ledger works again")
		}
	}
}

// closeChain is Close's last pass, when this Store committed since its
// last one: best effort, for at most closeChainTimeout (whatever it leaves
// is chained by another node's pass or the next read).
func (s *Store) closeChain() {
	if s.chain.done == nil {
		return
	}
	<-s.chain.done
	if !s.chain.dirty.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeChainTimeout)
	defer cancel()
	if _, _, err := s.chainAll(ctx, true, 0, 0); err != nil {
		s.cfg.Logger.Warn("postgres store: chaining the audit ledger at close failed", slog.Any("err", err))
	}
}
