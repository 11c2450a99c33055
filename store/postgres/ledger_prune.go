package postgres

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"time"

	"github.com/carmyhq/carmy/store/audit"
)

// The ledger's upkeep, which any process of a fleet may run at any time,
// as often as it likes: each is one transaction under the head row, and
// doing it twice does nothing more than once.

// pruneChunk bounds the entries one transaction of PruneAudit deletes.
const pruneChunk = 10000

// PruneAudit deletes the ledger's entries from the first on, up to the
// first whose time is not before cutoff, and keeps the {seq, hash} of the
// last deleted as the checkpoint, so what remains still verifies from it.
// It returns how many it deleted. What was queued is chained first (so
// that the checkpoint is a head the chain passed through). Entries are
// deleted pruneChunk to a transaction; an error leaves the ledger pruned as far as the committed
// ones went.
func (s *Store) PruneAudit(ctx context.Context, cutoff time.Time) (int, error) {
	if err := s.chainQueued(ctx); err != nil {
		return 0, err
	}
	total := 0
	for {
		n, err := s.pruneChunk(ctx, cutoff)
		total += n
		if err != nil || n < pruneChunk {
			return total, err
		}
	}
}

// pruneChunk deletes up to pruneChunk entries, under the head row.
func (s *Store) pruneChunk(ctx context.Context, cutoff time.Time) (int, error) {
	tx, err := s.pool.BeginTx(ctx, readCommitted)
	if err != nil {
		return 0, notApplied("audit prune", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, s.lq.lockHead); err != nil {
		return 0, notApplied("audit prune", err)
	}
	_, cp, err := s.auditHeads(ctx, tx)
	if err != nil {
		return 0, err
	}
	var upTo *int64
	if err := tx.QueryRow(ctx, s.lq.pruneUpTo, cutoff, pruneChunk).Scan(&upTo); err != nil {
		return 0, notApplied("audit prune", err)
	}
	if upTo == nil {
		return 0, nil
	}
	var line []byte
	if err := tx.QueryRow(ctx, s.lq.entry, *upTo).Scan(&line); err != nil {
		return 0, notApplied("audit prune", err)
	}
	var e audit.Entry
	if err := json.Unmarshal(line, &e); err != nil {
		return 0, fmt.Errorf("postgres: audit prune: entry %d: %w", *upTo, err)
	}
	if _, err := tx.Exec(ctx, s.lq.prune, *upTo, e.Hash); err != nil {
		return 0, notApplied("audit prune", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, atCommit("audit prune", err)
	}
	return int(uint64(*upTo) - cp.Seq), nil
}

// SignAudit appends a checkpoint entry, by actor, signing the ledger's
// head with key (audit.Sign), unless a checkpoint was signed less than
// every ago by the database's clock (by any process), or the head is
// itself a checkpoint (nothing was appended since the last), or the
// ledger is empty. What was queued is chained first, so the head signed
// holds every decision committed before the call. So processes that each call it every minute append
// about one checkpoint a minute between them. It returns the head it
// signed, and false when it signed none.
func (s *Store) SignAudit(ctx context.Context, key ed25519.PrivateKey, actor string, every time.Duration) (audit.Head, bool, error) {
	at := time.Now()
	if err := s.chainQueued(ctx); err != nil {
		return audit.Head{}, false, err
	}
	tx, err := s.pool.BeginTx(ctx, readCommitted)
	if err != nil {
		return audit.Head{}, false, notApplied("audit sign", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, s.lq.lockHead); err != nil {
		return audit.Head{}, false, notApplied("audit sign", err)
	}
	head, cp, err := s.auditHeads(ctx, tx)
	if err != nil || head.Seq == 0 {
		return audit.Head{}, false, err
	}
	var due bool
	if err := tx.QueryRow(ctx, s.lq.checkpointGate, every.Microseconds()).Scan(&due); err != nil {
		return audit.Head{}, false, notApplied("audit sign", err)
	}
	if !due {
		return audit.Head{}, false, nil
	}
	if head.Seq > cp.Seq {
		var line []byte
		if err := tx.QueryRow(ctx, s.lq.entry, int64(head.Seq)).Scan(&line); err != nil {
			return audit.Head{}, false, notApplied("audit sign", err)
		}
		var e audit.Entry
		if err := json.Unmarshal(line, &e); err != nil {
			return audit.Head{}, false, fmt.Errorf("postgres: audit sign: entry %d: %w", head.Seq, err)
		}
		if e.Kind == audit.KindCheckpoint {
			return audit.Head{}, false, nil
		}
	}
	signed := audit.Sign(key, head)
	d := audit.Draft{Time: at, Actor: actor, Kind: audit.KindCheckpoint, Checkpoint: &signed}
	// The checkpoint is chained here, under the head row this
	// transaction holds, right after the head it signs (not queued: a
	// draft queued meanwhile would come between them).
	if !s.cfg.NoLedger {
		if _, err := s.extend(ctx, tx, head, []audit.Draft{d}); err != nil {
			return audit.Head{}, false, notApplied("audit sign", err)
		}
	}
	if _, err := tx.Exec(ctx, s.lq.signed); err != nil {
		return audit.Head{}, false, notApplied("audit sign", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return audit.Head{}, false, atCommit("audit sign", err)
	}
	return head, true, nil
}
