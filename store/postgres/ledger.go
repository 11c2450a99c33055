package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// The audit ledger (docs/audit.md) of the stores sharing a database: every
// transaction that decides something about an execution (a reservation,
// an outcome, a cancel, a resolve, a release, executions marked
// interrupted) queues the drafts of its entries before it commits, in the
// same transaction (appendAudit, one row of audit_queue), so a draft
// exists exactly when its decision does.
//
// Order. The entries are chained (package audit: one implementation, so
// `carmy audit verify` checks a fleet's export as a cluster's) by the
// chainer (ledger_chain.go), not by the deciding transaction: a chaining
// pass locks the one row of audit_head (SELECT … FOR UPDATE), takes the
// committed queued rows in id order, links their drafts after the head it
// holds, inserts them into audit, deletes the rows and moves the head, in
// one transaction. So seqs follow each other with no gap and no fork, a
// transaction's drafts keep their order and stay together, and each draft
// is chained exactly once; seq order is the order the chainer took the
// drafts in (about, not exactly, the order their decisions committed: a
// transaction that took its queue id earlier may commit later and be
// chained in a later pass). Deciding transactions never wait for the head
// row, so their commits no longer happen one at a time across the fleet.
// A draft joins the chain a moment after its decision commits: within
// Config.LedgerChainEvery when its store runs (the background pass), and
// before any read of the chain through a Store returns (every reader
// chains first), so a reader sees every decision committed before its
// call. The head row is taken by the chainer, PruneAudit and SignAudit
// only, each with no other lock, so they never wait for one another in
// opposite orders.
//
// Time. An entry's time is the decision's, stamped by the process that
// decides (the execution's start for a reservation, the moment the write
// was asked for otherwise), never the database's clock: the entry says
// what the node decided.
//
// Actor. store.ActorFrom names who asked (a principal, "probe"); without
// one, the store's node (Config.NodeID), or the record's node for a
// completion or release a store with no node id decides.

// ledgerQueries are the ledger's statements.
type ledgerQueries struct {
	lockHead, insert, head, entry, page, pruneUpTo, prune, checkpointGate, signed string
}

func newLedgerQueries(n names) ledgerQueries {
	x := n.expand
	return ledgerQueries{
		lockHead: x(`SELECT seq, hash FROM {audit_head} WHERE singleton FOR UPDATE`),
		// $1 seqs, $2 times, $3 lines, $4 and $5 the new head.
		insert: x(`WITH ins AS (
	INSERT INTO {audit} (seq, at, line) SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::bytea[])
)
UPDATE {audit_head} SET seq = $4, hash = $5 WHERE singleton`),
		head:  x(`SELECT seq, hash, cp_seq, cp_hash FROM {audit_head} WHERE singleton`),
		entry: x(`SELECT line FROM {audit} WHERE seq = $1`),
		// $1 after, $2 limit.
		page: x(`SELECT line FROM {audit} WHERE seq > $1 ORDER BY seq LIMIT $2`),
		// The last of the oldest $2 entries that comes before the first of
		// them not older than $1 (NULL: none).
		pruneUpTo: x(`WITH w AS (SELECT seq, at FROM {audit} ORDER BY seq LIMIT $2)
SELECT max(w.seq) FROM w WHERE w.seq < coalesce((SELECT min(seq) FROM w WHERE at >= $1), 9223372036854775807)`),
		// $1 the last seq pruned, $2 its hash.
		prune: x(`WITH d AS (DELETE FROM {audit} WHERE seq <= $1)
UPDATE {audit_head} SET cp_seq = $1, cp_hash = $2 WHERE singleton`),
		// Whether a checkpoint may be signed: none was within $1 µs (by the
		// database's clock, so that the nodes' clocks do not decide it).
		checkpointGate: x(`SELECT signed_at IS NULL OR signed_at <= clock_timestamp() - $1 * interval '1 microsecond' FROM {audit_head} WHERE singleton`),
		signed:         x(`UPDATE {audit_head} SET signed_at = clock_timestamp() WHERE singleton`),
	}
}

// appendAudit queues drafts, in order, in tx (one row of audit_queue),
// for the chainer (ledger_chain.go): they exist exactly when tx commits,
// and tx takes no lock that another store's transaction waits for.
// Nothing is done for no drafts, or a store configured with
// Config.NoLedger. An error means tx must roll back.
func (s *Store) appendAudit(ctx context.Context, tx pgx.Tx, drafts []audit.Draft) error {
	if len(drafts) == 0 || s.cfg.NoLedger {
		return nil
	}
	encoded := make([][]byte, len(drafts))
	for i, d := range drafts {
		encoded[i] = encodeDraft(d)
	}
	if _, err := tx.Exec(ctx, s.cq.enqueue, encoded); err != nil {
		return fmt.Errorf("audit ledger: queue: %w", err)
	}
	return nil
}

// extend links drafts after head, which tx holds (it locked the head
// row), inserts them and moves the head; it returns the new head. An
// error means tx must roll back.
func (s *Store) extend(ctx context.Context, tx pgx.Tx, head audit.Head, drafts []audit.Draft) (audit.Head, error) {
	seqs := make([]int64, len(drafts))
	ats := make([]time.Time, len(drafts))
	lines := make([][]byte, len(drafts))
	var scratch []byte
	for i, d := range drafts {
		var e audit.Entry
		e, head = head.Next(d, scratch)
		seqs[i], ats[i] = int64(e.Seq), e.Time
		lines[i] = e.Line(nil)
	}
	if _, err := tx.Exec(ctx, s.lq.insert, seqs, ats, lines, int64(head.Seq), head.Hash); err != nil {
		return audit.Head{}, fmt.Errorf("append: %w", err)
	}
	return head, nil
}

// actor is who decides what ctx asks for: store.ActorFrom, else the
// store's node, else fallback (the record's node).
func (s *Store) actor(ctx context.Context, fallback string) string {
	if a := store.ActorFrom(ctx); a != "" {
		return a
	}
	if s.cfg.NodeID != "" {
		return s.cfg.NodeID
	}
	return fallback
}

// draftOf is the entry of a decision of kind about rec, by actor at at.
func draftOf(kind audit.Kind, rec store.Record, actor string, at time.Time) audit.Draft {
	return audit.Draft{
		Time: at, Kind: kind, Actor: actor, ExecutionID: rec.ExecutionID, Principal: rec.Key.Principal,
		Tool: rec.Tool, Fingerprint: rec.Fingerprint, Status: string(rec.Status),
	}
}

// reservedDraft is the entry of a reservation: by its principal, at the
// execution's start.
func reservedDraft(it *reservation, rec store.Record) audit.Draft {
	at := it.exec.StartedAt
	if at.IsZero() {
		at = it.at
	}
	return draftOf(audit.KindReserved, rec, it.key.Principal, at)
}

// roundDrafts are the entries of a round's decisions: its reservations
// that reserved, then its completions that applied, in the round's order
// (the order its statements wrote them).
func (s *Store) roundDrafts(batch []*reservation, kinds []decision, outs []reserveResult, settles []*completion, souts []completeResult) []audit.Draft {
	var drafts []audit.Draft
	for i, it := range batch {
		if kinds[i] == decidedReserved && outs[i].err == nil {
			drafts = append(drafts, reservedDraft(it, outs[i].res.Record))
		}
	}
	for i, c := range settles {
		if o := souts[i]; o.applied && o.err == nil {
			drafts = append(drafts, draftOf(audit.Kind(o.rec.Status), o.rec, s.actor(c.ctx, o.rec.NodeID), c.at))
		}
	}
	return drafts
}
