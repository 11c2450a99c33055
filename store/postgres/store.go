package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy/store"
)

// Store is a store.Store kept in PostgreSQL. It is safe for concurrent
// use, and several processes (each with its own Store) may share one
// database: every decision is taken by the server, under the locks the
// package documentation describes.
type Store struct {
	pool  *pgxpool.Pool
	owned bool // Close closes pool
	cfg   Config
	// maxBytes is the bound on bytes (Config.MaxBytes, SetMaxBytes).
	maxBytes atomic.Int64
	names    names
	q        queries
	fq       fleetQueries
	lq       ledgerQueries
	cq       chainQueries
	chain    chainState // the chainer's (ledger_chain.go)
	rounds   rounds
	held     heldShare       // chooses Reserve's path (reserve_path.go)
	slots    []string        // name this Store's leases, one a round in flight (leases.go)
	ctx      context.Context // ends at Close: rounds in flight stop
	stop     context.CancelFunc
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Expirer = (*Store)(nil)
)

// Open connects to the database named by dsn (a libpq connection string
// or URL; pgxpool's pool_* parameters size the pool), creates or migrates
// the tables, and returns the Store. Close releases the pool.
//
// An error matching store.ErrUnavailable means the server could not be
// reached or did not answer; the tables may then be untouched or fully
// migrated, never half (a migration is one transaction).
func Open(ctx context.Context, dsn string, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// Not pgx's error, which quotes dsn and redacts its passwords
		// only as far as a pattern finds them.
		return nil, fmt.Errorf("postgres: the connection string %s cannot be parsed", RedactDSN(dsn))
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	s, err := New(ctx, pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// New returns a Store on a pool the caller owns (Close leaves it open),
// after creating or migrating the tables.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	schema, err := resolveSchema(ctx, pool, cfg.Schema)
	if err != nil {
		return nil, err
	}
	n := names{schema: schema, prefix: cfg.TablePrefix}
	if err := migrate(ctx, pool, n, cfg.Schema != "", cfg.Logger); err != nil {
		return nil, err
	}
	s := &Store{pool: pool, cfg: cfg, names: n, q: newQueries(n), fq: newFleetQueries(n), lq: newLedgerQueries(n), cq: newChainQueries(n)}
	for range cfg.Rounds {
		s.slots = append(s.slots, newSlot())
	}
	s.rounds.free = slices.Clone(s.slots)
	s.maxBytes.Store(cfg.MaxBytes)
	s.rounds.s = s
	s.ctx, s.stop = context.WithCancel(context.Background())
	if !cfg.NoLedger && cfg.LedgerChainEvery > 0 {
		s.chain.done = make(chan struct{})
		go s.chainLoop(cfg.LedgerChainEvery)
	}
	return s, nil
}

// Close ends the reservation rounds in flight, returns the leases to the
// counts (at most closeFoldTimeout; a Store that cannot leaves its leases
// to the next fold, see leases.go), chains the audit drafts it queued (at
// most closeChainTimeout; what it cannot is chained by the next pass of
// another store, see ledger_chain.go) and closes the pool when Open made
// it. Calls in flight fail.
func (s *Store) Close() {
	s.stop()
	s.foldLeases()
	s.closeChain()
	if s.owned {
		s.pool.Close()
	}
}

// Capacity returns the bound on records this Store applies.
func (s *Store) Capacity() int { return s.cfg.Capacity }

// Schema returns the schema that holds the tables.
func (s *Store) Schema() string { return s.names.schema }

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, executionID string) (store.Record, error) {
	if !validText(executionID) {
		return store.Record{}, store.ErrNotFound
	}
	return s.one(ctx, "get", s.q.get, executionID)
}

// Lookup implements store.Store.
func (s *Store) Lookup(ctx context.Context, key store.Key) (store.Record, error) {
	if !validKey(key) {
		return store.Record{}, store.ErrNotFound
	}
	return s.one(ctx, "lookup", s.q.lookup, key.Principal, key.Session, key.RequestID)
}

// Stats implements store.Store. Entries and Bytes are the shared counts
// every reservation checks, not estimates.
func (s *Store) Stats(ctx context.Context) (store.Stats, error) {
	var n, b int64
	if err := s.pool.QueryRow(ctx, s.q.stats).Scan(&n, &b); err != nil {
		return store.Stats{}, readErr("stats", err)
	}
	return store.Stats{Entries: int(n), Capacity: s.cfg.Capacity, Bytes: b, MaxBytes: s.maxBytes.Load()}, nil
}

// SetMaxBytes changes the bound on bytes this Store applies (0 or less:
// none); see Config.MaxBytes.
func (s *Store) SetMaxBytes(n int64) { s.maxBytes.Store(max(n, 0)) }

// Interrupted implements store.InterruptedCounter.
func (s *Store) Interrupted(ctx context.Context) (int, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, s.q.interrupted).Scan(&n); err != nil {
		return 0, readErr("count interrupted", err)
	}
	return int(n), nil
}

// one reads the record a query selects, or store.ErrNotFound.
func (s *Store) one(ctx context.Context, op, sql string, args ...any) (store.Record, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return store.Record{}, readErr(op, err)
	}
	rec, err := pgx.CollectExactlyOneRow(rows, scanRecord)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Record{}, store.ErrNotFound
	case err != nil:
		return store.Record{}, readErr(op, err)
	}
	return rec, nil
}

// recordColumns are the columns scanRecord reads, in its order.
const recordColumns = `principal, session_id, request_id, execution_id, seq, tool, fingerprint,
	status, node_id, started_at, finished_at, data, error, resolved, resolved_by, ` + gateColumns

// scanRecord reads a row of recordColumns.
func scanRecord(row pgx.CollectableRow) (store.Record, error) {
	var (
		r        store.Record
		seq      int64
		status   string
		finished *time.Time
		data     []byte
		errBody  []byte
		by       *string
		gate     gateCols
	)
	err := row.Scan(append([]any{&r.Key.Principal, &r.Key.Session, &r.Key.RequestID, &r.ExecutionID, &seq, &r.Tool,
		&r.Fingerprint, &status, &r.NodeID, &r.StartedAt, &finished, &data, &errBody, &r.Resolved, &by}, gate.dest()...)...)
	if err != nil {
		return store.Record{}, err
	}
	gate.fill(&r)
	if by != nil {
		r.ResolvedBy = *by
	}
	r.Seq, r.Status = uint64(seq), store.Status(status)
	r.StartedAt = r.StartedAt.UTC()
	if finished != nil {
		r.FinishedAt = finished.UTC()
	}
	if data != nil {
		r.Data = data
	}
	if errBody != nil {
		r.Error = errBody
	}
	return r, nil
}

// validKey reports whether every part of key can be stored; a key that
// cannot has no record.
func validKey(k store.Key) bool {
	return validText(k.Principal) && validText(k.Session) && validText(k.RequestID)
}
