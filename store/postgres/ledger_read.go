package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store/audit"
)

// MaxAuditExport bounds the entries of one AuditExport.
const MaxAuditExport = 10000

// snapshotRead is the isolation of a read of the ledger that spans
// statements: one snapshot, so that a prune committing meanwhile cannot
// make its checkpoint and its entries disagree.
var snapshotRead = pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}

// Every read of the chain here first chains the drafts queued by the
// decisions committed before it (chainQueued, ledger_chain.go): a reader
// sees every one of them.

// AuditHead returns the {seq, hash} of the ledger's last entry (the
// checkpoint's when every entry was pruned; audit.Start when there has
// been none), after chaining what was queued. An error matches
// store.ErrUnavailable.
func (s *Store) AuditHead(ctx context.Context) (audit.Head, error) {
	if err := s.chainQueued(ctx); err != nil {
		return audit.Head{}, err
	}
	head, _, err := s.auditHeads(ctx, s.pool)
	return head, err
}

// AuditCheckpoint returns the {seq, hash} of the last pruned entry
// (audit.Start when none was). It does not chain: queued drafts are never
// pruned before they are chained (PruneAudit chains first).
func (s *Store) AuditCheckpoint(ctx context.Context) (audit.Head, error) {
	_, cp, err := s.auditHeads(ctx, s.pool)
	return cp, err
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// auditHeads reads the head and the checkpoint.
func (s *Store) auditHeads(ctx context.Context, q querier) (head, cp audit.Head, err error) {
	var seq, cpSeq int64
	if err := q.QueryRow(ctx, s.lq.head).Scan(&seq, &head.Hash, &cpSeq, &cp.Hash); err != nil {
		return audit.Head{}, audit.Head{}, readErr("audit head", err)
	}
	head.Seq, cp.Seq = uint64(seq), uint64(cpSeq)
	return head, cp, nil
}

// AuditExport writes to w up to limit entries (at most MaxAuditExport)
// after seq after, as export lines (audit.Entry.Line), preceded by a
// checkpoint line (audit.CheckpointLine) naming the {seq, hash} the first
// entry follows unless it is the chain's first entry; an after below the
// checkpoint starts from the checkpoint. What was queued is chained
// first. It returns the seq of the last entry written (the anchor's when
// none was). The entries come from one snapshot of the database. An error before anything was written matches
// store.ErrUnavailable; one after cuts the export short.
func (s *Store) AuditExport(ctx context.Context, w io.Writer, after uint64, limit int) (uint64, error) {
	limit = min(max(limit, 1), MaxAuditExport)
	if err := s.chainQueued(ctx); err != nil {
		return 0, err
	}
	tx, err := s.pool.BeginTx(ctx, snapshotRead)
	if err != nil {
		return 0, readErr("audit export", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	head, anchor, err := s.auditHeads(ctx, tx)
	if err != nil {
		return 0, err
	}
	if after > head.Seq {
		return after, nil // past the head: nothing yet
	}
	if after > anchor.Seq {
		var line []byte
		if err := tx.QueryRow(ctx, s.lq.entry, int64(after)).Scan(&line); err != nil {
			return 0, readErr("audit export", err)
		}
		var e audit.Entry
		if err := json.Unmarshal(line, &e); err != nil {
			return 0, fmt.Errorf("postgres: audit export: entry %d: %w", after, err)
		}
		anchor = audit.Head{Seq: e.Seq, Hash: e.Hash}
	}
	var buf []byte
	if anchor.Seq > 0 {
		buf = audit.CheckpointLine(buf, anchor)
	}
	rows, err := tx.Query(ctx, s.lq.page, int64(anchor.Seq), limit)
	if err != nil {
		return 0, readErr("audit export", err)
	}
	defer rows.Close()
	last := anchor.Seq
	for rows.Next() {
		var line []byte
		if err := rows.Scan(&line); err != nil {
			return last, readErr("audit export", err)
		}
		buf = append(buf, line...)
		last++
		if len(buf) >= 64<<10 {
			if _, err := w.Write(buf); err != nil {
				return last, err
			}
			buf = buf[:0]
		}
	}
	if err := rows.Err(); err != nil {
		return last, readErr("audit export", err)
	}
	_, err = w.Write(buf)
	return last, err
}
