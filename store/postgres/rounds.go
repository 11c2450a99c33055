package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store"
)

// Reservations of new identities commit in rounds, one round at a time per
// Store: while a round is in flight, new reservations queue, and go
// together as the next round, in one transaction and one commit.
//
// Every reservation must hold the meta row until it commits (that is what
// makes capacity and quotas exact), so transactions that reserve commit one
// at a time, each paying a WAL flush while it holds the lock. A round pays
// one flush for all its members. Measured with BenchmarkReserveComplete on
// the 2-vCPU test machine (fdatasync 1.6 to 2.8 ms, the machine loaded by
// other work, so the spread is wide), three interleaved runs each, calls
// per second with one reservation per transaction, then with rounds:
// 16 callers 151-179, then 299-709; 64 callers 95-100 (64 backends queue
// on one row lock), then 381-612.
// Processes sharing the database take turns at the lock, each with a round
// of its own.
//
// A round is two round trips: one pipeline of BEGIN, the lock and every
// member's statement, then COMMIT. Members are answered once the round's
// outcome is known. Two members of one round never share an identity or
// an execution id (the later waits for the next round), so every answer
// from a held record reads a committed record.

// maxRound bounds the members of one round.
const maxRound = 128

// roundTimeout bounds a round whose members have no deadline.
const roundTimeout = 30 * time.Second

// reservation is one Reserve waiting for its round.
type reservation struct {
	ctx         context.Context
	key         store.Key
	fingerprint string
	exec        store.Execution
	maxBytes    int64              // the store's bound on bytes when submitted (0: none)
	taken       bool               // in a round; under rounds.mu
	done        chan reserveResult // receives the answer; buffered
}

type reserveResult struct {
	res store.Reservation
	err error
}

// rounds is a Store's queue of reservations and its round runner.
type rounds struct {
	s       *Store
	mu      sync.Mutex
	queue   []*reservation
	running bool
}

// submit queues it and waits for its answer, or for its context: a
// reservation that ends waiting in the queue was not applied; one that
// ends while its round is in flight may be.
func (r *rounds) submit(ctx context.Context, it *reservation) (store.Reservation, error) {
	it.done = make(chan reserveResult, 1)
	r.mu.Lock()
	r.queue = append(r.queue, it)
	start := !r.running
	r.running = true
	r.mu.Unlock()
	if start {
		go r.run()
	}
	select {
	case out := <-it.done:
		return out.res, out.err
	case <-ctx.Done():
	}
	r.mu.Lock()
	taken := it.taken
	if !taken {
		r.queue = slices.DeleteFunc(r.queue, func(q *reservation) bool { return q == it })
	}
	r.mu.Unlock()
	if !taken {
		return store.Reservation{}, notApplied("reserve", ctx.Err())
	}
	select {
	case out := <-it.done:
		return out.res, out.err
	default:
		return store.Reservation{}, fmt.Errorf("postgres: reserve: %w: the context ended while its round was in flight: %w",
			store.ErrCommitUnknown, ctx.Err())
	}
}

// run runs rounds until the queue is empty.
func (r *rounds) run() {
	for {
		batch := r.take()
		if len(batch) == 0 {
			return
		}
		r.s.round(batch)
	}
}

// take removes the next round's members from the queue and marks them
// taken: up to maxRound, the first of each identity and execution id (the
// others stay for a later round), skipping those whose context has ended
// (their callers answer for them). With none it stops the runner.
func (r *rounds) take() []*reservation {
	r.mu.Lock()
	defer r.mu.Unlock()
	var (
		batch []*reservation
		rest  []*reservation
		keys  = make(map[store.Key]bool)
		ids   = make(map[string]bool)
	)
	for _, it := range r.queue {
		switch {
		case it.ctx.Err() != nil:
		case len(batch) == maxRound || keys[it.key] || ids[it.exec.ID]:
			rest = append(rest, it)
		default:
			keys[it.key], ids[it.exec.ID] = true, true
			it.taken = true
			batch = append(batch, it)
		}
	}
	r.queue = rest
	if len(batch) == 0 {
		r.running = false
	}
	return batch
}

// round reserves batch in one transaction and answers every member.
func (s *Store) round(batch []*reservation) {
	ctx, cancel := s.roundContext(batch)
	defer cancel()
	outs := make([]reserveResult, len(batch))
	defer func() {
		for i, it := range batch {
			it.done <- outs[i]
		}
	}()
	fail := func(err error) {
		for i := range outs {
			outs[i] = reserveResult{err: err}
		}
	}

	// One round trip for BEGIN, the lock and every statement; the
	// transaction is READ COMMITTED whatever the server's default, since
	// the statements must see what committed while the lock was awaited.
	b := &pgx.Batch{}
	b.BeginTx(readCommitted)
	b.Queue(s.q.lockMeta)
	for _, it := range batch {
		size := store.RecordSize(store.Record{Key: it.key, ExecutionID: it.exec.ID, Tool: it.exec.Tool, Fingerprint: it.fingerprint, NodeID: it.exec.NodeID})
		b.Queue(s.q.reserve, s.cfg.Capacity, it.key.Principal, it.key.Session, it.key.RequestID,
			it.exec.ID, it.exec.Tool, it.fingerprint, it.exec.NodeID, it.exec.StartedAt, it.exec.Quota,
			it.exec.ByteQuota, size+it.exec.Headroom, it.maxBytes, size, it.exec.DedupeWindow.Microseconds())
	}
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	defer tx.Rollback(context.WithoutCancel(ctx)) // releases the connection; after Commit a no-op
	rows := make([]reserveRow, len(batch))
	_, err := br.Exec() // BEGIN
	if err == nil {
		_, err = br.Exec() // the lock
	}
	for i := range rows {
		if err == nil {
			err = rows[i].scan(br.QueryRow())
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fail(notApplied("reserve", err))
		return
	}

	kinds := make([]decision, len(batch))
	for i, it := range batch {
		outs[i], kinds[i] = decide(it, &rows[i])
	}
	if !slices.Contains(kinds, decidedReserved) {
		return // nothing written: the deferred rollback ends it
	}
	err = tx.Commit(ctx)
	if err == nil {
		return
	}
	commitErr := atCommit("reserve", err)
	for i, kind := range kinds {
		switch kind {
		case decidedReserved:
			outs[i] = reserveResult{err: commitErr}
		case decidedRefused:
			// The bound may have been reached by members that did not
			// commit: the refusal is not an answer, only "not applied".
			outs[i] = reserveResult{err: notApplied("reserve", fmt.Errorf("its round did not commit: %w", err))}
		}
	}
}

// roundContext bounds a round by the latest deadline of its members (a
// member that gives up earlier is answered by its own Reserve), or by
// roundTimeout when one has none. Close ends it.
func (s *Store) roundContext(batch []*reservation) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, it := range batch {
		d, ok := it.ctx.Deadline()
		if !ok {
			return context.WithTimeout(s.ctx, roundTimeout)
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(s.ctx, latest)
}
