package postgres

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/carmyhq/carmy/store/audit"
)

// The fleet's audit ledger (ledger.go): every node queues the entries of
// its decisions in their transactions, unchained, and its Store chains
// what every node committed (ledger_chain.go: about every
// Config.LedgerChainEvery while it decides, once at Close, and before
// every read, so AuditHead and AuditExport include every decision
// committed before them), serves the ledger from the database (AuditHead,
// AuditExport: every node answers alike), and keeps it up: each node,
// every minute, prunes the entries past
// FleetConfig.AuditRetention and, with FleetConfig.AuditSigningKey, signs
// a checkpoint of the head unless another node signed one within the
// interval (Store.PruneAudit, Store.SignAudit: both are idempotent, so
// any number of nodes may run them).

// DefaultAuditCheckpointEvery is how often a fleet signs the ledger's
// head, unless FleetConfig.AuditCheckpointEvery says otherwise.
const DefaultAuditCheckpointEvery = time.Minute

// AuditHead returns the {seq, hash} of the ledger's last entry
// (Store.AuditHead).
func (f *Fleet) AuditHead(ctx context.Context) (audit.Head, error) {
	s, err := f.store()
	if err != nil {
		return audit.Head{}, err
	}
	return s.AuditHead(ctx)
}

// AuditExport writes the ledger after seq after (Store.AuditExport).
func (f *Fleet) AuditExport(ctx context.Context, w io.Writer, after uint64, limit int) (uint64, error) {
	s, err := f.store()
	if err != nil {
		return 0, err
	}
	return s.AuditExport(ctx, w, after, limit)
}

// ledgerLoop prunes and signs the ledger, as configured, until ctx ends.
func (f *Fleet) ledgerLoop(ctx context.Context) {
	if f.cfg.AuditRetention <= 0 && f.cfg.AuditSigningKey == nil {
		return
	}
	every := f.cfg.AuditCheckpointEvery
	if every <= 0 {
		every = DefaultAuditCheckpointEvery
	}
	tick := min(every, time.Minute)
	var lastPrune time.Time
	for {
		if f.cfg.AuditRetention > 0 && time.Since(lastPrune) >= time.Minute {
			lastPrune = time.Now()
			f.pruneAudit(ctx)
		}
		if f.cfg.AuditSigningKey != nil {
			f.signAudit(ctx, every)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(tick):
		}
	}
}

// pruneAudit prunes the entries older than the retention.
func (f *Fleet) pruneAudit(ctx context.Context) {
	s := f.st.Load()
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := s.PruneAudit(pctx, time.Now().UTC().Add(-f.cfg.AuditRetention))
	if n > 0 {
		cp, _ := s.AuditCheckpoint(pctx)
		f.log.Info("audit retention: pruned the ledger", slog.Int("count", n), slog.Any("checkpoint", cp),
			slog.Duration("retention", f.cfg.AuditRetention))
	}
	if err != nil {
		f.log.Warn("audit retention: prune failed", slog.Any("err", err))
	}
}

// signAudit signs a checkpoint of the head, unless one was signed within
// every.
func (f *Fleet) signAudit(ctx context.Context, every time.Duration) {
	s := f.st.Load()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// A little less than every, so that a node whose own tick comes a
	// moment early still signs about every interval.
	if _, _, err := s.SignAudit(sctx, f.cfg.AuditSigningKey, f.cfg.NodeID, every-every/10); err != nil {
		f.log.Warn("audit: signing a checkpoint failed", slog.Any("err", err))
	}
}
