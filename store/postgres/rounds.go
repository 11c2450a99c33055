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

// Writes that hold the meta row commit in rounds, one round at a time per
// Store: while a round is in flight, new reservations and completions
// queue, and go together as the next round, in one transaction and one
// commit.
//
// Every reservation and completion must hold the meta row until it
// commits (that is what makes capacity, quotas and bytes exact), so
// transactions that write commit one at a time, each paying a WAL flush
// while it holds the lock. A round pays one flush for all its members.
// Measured with BenchmarkReserveComplete on the 2-vCPU test machine
// (fdatasync 1.6 to 2.8 ms, the machine loaded by other work, so the
// spread is wide), three interleaved runs each, calls per second with one
// reservation per transaction, then with rounds of reservations:
// 16 callers 151-179, then 299-709; 64 callers 95-100 (64 backends queue
// on one row lock), then 381-612. Completions, which were still one
// transaction each, joined the rounds next (rounds_complete.go): see
// docs/performance.md for carmy bench before and after.
// Processes sharing the database took turns at the lock, each with a round
// of its own, until the leases (leases.go) let their rounds commit side by
// side.
//
// A round is two round trips when its Store's leases hold what it needs
// (leases.go): one pipeline of BEGIN, the planner's settings (roundPlan),
// the lock of its own lease rows (only when it writes: lockLeases) and a
// statement for all its reservations and one for all its completions
// against the leases, then COMMIT; the rounds of other Stores on the
// database take none of the rows it holds. Otherwise it runs again under
// the meta row (lockedRound): refilled leases, or every lease folded into
// the counts and a statement for all against them (rounds_set.go), and
// one statement per member when those for all did not apply. Members are
// answered once the round's outcome is known. Two reservations of one
// round never share an identity or an execution id (the later waits for
// the next round), so every answer from a held record reads a committed
// record. Completions run after the round's reservations, in the order
// they queued; each statement sees what the earlier ones wrote, as if
// they ran one after the other.

// maxRound bounds the reservations of one round, and its completions.
const maxRound = 128

// roundTimeout bounds a round whose members have no deadline.
const roundTimeout = 30 * time.Second

// pending is what every member of a round has: its caller's context, and
// whether a round took it (under rounds.mu).
type pending struct {
	ctx   context.Context
	at    time.Time // when it was asked for: its audit entry's time
	taken bool
}

// reservation is one Reserve waiting for its round.
type reservation struct {
	pending
	key         store.Key
	fingerprint string
	exec        store.Execution
	maxBytes    int64              // the store's bound on bytes when submitted (0: none)
	done        chan reserveResult // receives the answer; buffered
}

type reserveResult struct {
	res store.Reservation
	err error
}

// rounds is a Store's queues of writes and its round runner.
type rounds struct {
	s       *Store
	mu      sync.Mutex
	queue   []*reservation
	settles []*completion
	// free are the slots (leases.go) of no round in flight; a runner
	// holds one while it runs, so len(free) == 0 means no runner more.
	free []string
}

// submit queues it and waits for its answer, or for its context: a
// reservation that ends waiting in the queue was not applied; one that
// ends while its round is in flight may be.
func (r *rounds) submit(ctx context.Context, it *reservation) (store.Reservation, error) {
	it.ctx, it.at, it.done = ctx, time.Now(), make(chan reserveResult, 1)
	r.enqueue(func() { r.queue = append(r.queue, it) })
	out, err := await(r, "reserve", &it.pending, it.done, func() {
		r.queue = slices.DeleteFunc(r.queue, func(q *reservation) bool { return q == it })
	})
	if err != nil {
		return store.Reservation{}, err
	}
	return out.res, out.err
}

// enqueue adds a member (add runs under r.mu) and starts the runner when
// none runs.
func (r *rounds) enqueue(add func()) {
	r.mu.Lock()
	add()
	var slot string
	start := len(r.free) > 0
	if start {
		slot, r.free = r.free[len(r.free)-1], r.free[:len(r.free)-1]
	}
	r.mu.Unlock()
	if start {
		go r.run(slot)
	}
}

// await waits for a queued member's answer on done, or for its context:
// a member that ends waiting in the queue is removed (dequeue runs under
// r.mu) and was not applied; one that ends while its round is in flight
// may have been, and its outcome is unknown.
func await[R any](r *rounds, op string, p *pending, done <-chan R, dequeue func()) (R, error) {
	var zero R
	select {
	case out := <-done:
		return out, nil
	case <-p.ctx.Done():
	}
	r.mu.Lock()
	taken := p.taken
	if !taken {
		dequeue()
	}
	r.mu.Unlock()
	if !taken {
		return zero, notApplied(op, p.ctx.Err())
	}
	select {
	case out := <-done:
		return out, nil
	default:
		return zero, fmt.Errorf("postgres: %s: %w: the context ended while its round was in flight: %w",
			op, store.ErrCommitUnknown, p.ctx.Err())
	}
}

// run runs rounds with slot's leases until the queues are empty.
func (r *rounds) run(slot string) {
	for {
		batch, settles := r.take(slot)
		if len(batch) == 0 && len(settles) == 0 {
			return
		}
		r.s.round(slot, batch, settles)
	}
}

// take removes the next round's members from the queues and marks them
// taken, skipping those whose context has ended (their callers answer for
// them): up to maxRound reservations, the first of each identity and
// execution id (the others stay for a later round), and up to maxRound
// completions, the first of each identity. With none it stops the runner,
// whose slot is free again.
func (r *rounds) take(slot string) ([]*reservation, []*completion) {
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
	var settles, later []*completion
	settling := make(map[store.Key]bool)
	for _, c := range r.settles {
		switch {
		case c.ctx.Err() != nil:
		case len(settles) == maxRound || settling[c.key]:
			later = append(later, c)
		default:
			settling[c.key] = true
			c.taken = true
			settles = append(settles, c)
		}
	}
	r.settles = later
	if len(batch) == 0 && len(settles) == 0 {
		r.free = append(r.free, slot)
	}
	return batch, settles
}

// round writes batch and settles in one transaction and answers every
// member: against its Store's leases alone when they hold what it needs
// (ownRound), else under the meta row (lockedRound; leases.go).
func (s *Store) round(slot string, batch []*reservation, settles []*completion) {
	ctx, cancel := roundContext(s.ctx, batch, settles)
	defer cancel()
	outs := make([]reserveResult, len(batch))
	souts := make([]completeResult, len(settles))
	defer func() {
		for i, it := range batch {
			it.done <- outs[i]
		}
		for i, c := range settles {
			c.done <- souts[i]
		}
	}()
	if s.ownRound(ctx, slot, batch, settles, outs, souts) {
		return
	}
	s.lockedRound(ctx, slot, batch, settles, outs, souts)
}

// failAll answers every member with err.
func failAll(outs []reserveResult, souts []completeResult, err error) {
	for i := range outs {
		outs[i] = reserveResult{err: err}
	}
	for i := range souts {
		souts[i] = completeResult{err: err}
	}
}

// ownRound runs a round against its Store's leases, in one round trip for
// BEGIN, the lock of its own lease rows and a statement for all its
// reservations (reserveOwn) and one for all its completions
// (completeOwn), then COMMIT. It reports false, having written nothing,
// when they did not apply (a lease short, a bound changed, an identity
// another Store inserted meanwhile, or what reserveAll and completeAll do
// not apply to either); the transaction is READ COMMITTED whatever the
// server's default, since its statements must see what committed while
// the lock was awaited.
func (s *Store) ownRound(ctx context.Context, slot string, batch []*reservation, settles []*completion, outs []reserveResult, souts []completeResult) bool {
	b := &pgx.Batch{}
	b.BeginTx(readCommitted)
	b.Queue(roundPlan)
	s.queueLockLeases(b, slot, batch, settles)
	s.queueOwn(b, slot, batch, settles)
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	defer tx.Rollback(context.WithoutCancel(ctx)) // releases the connection; after Commit a no-op
	err := execEach(br, 3)                        // BEGIN, roundPlan, the lock
	var all allResults
	if err == nil {
		all, err = readAll(br, batch, settles)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		failAll(outs, souts, notApplied("write", err))
		return true
	}
	if !all.reserved || !all.settled {
		return false
	}
	copy(outs, all.outs)
	copy(souts, all.souts)
	s.commitRound(ctx, tx, batch, settles, all.kinds, outs, souts)
	return true
}

// lockedRound runs a round under the meta row. The first round trip takes
// the row, asks for leases (refill) and runs the round against them
// (reserveOwn, completeOwn, after a savepoint); when those did not apply,
// the second returns to the savepoint, folds every Store's leases into the
// counts and runs a statement for all the reservations and one for all
// the completions against the counts (reserveAll, completeAll,
// rounds_set.go); a third runs one statement per member when those did not
// apply. Then COMMIT.
func (s *Store) lockedRound(ctx context.Context, slot string, batch []*reservation, settles []*completion, outs []reserveResult, souts []completeResult) {
	b := &pgx.Batch{}
	b.BeginTx(readCommitted)
	b.Queue(roundPlan)
	b.Queue(s.q.lockMeta)
	refilling := s.queueRefill(b, slot, batch, settles)
	if refilling {
		b.Queue("SAVEPOINT own")
		s.queueOwn(b, slot, batch, settles)
	} else {
		s.queueExact(b, batch, settles)
	}
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	defer tx.Rollback(context.WithoutCancel(ctx)) // releases the connection; after Commit a no-op
	err := execEach(br, 3)                        // BEGIN, roundPlan, the lock
	granted := false
	if err == nil && refilling {
		err = br.QueryRow().Scan(&granted)
		if err == nil {
			_, err = br.Exec() // SAVEPOINT
		}
	}
	var all allResults
	if err == nil && refilling {
		all, err = readAll(br, batch, settles)
	} else if err == nil {
		all, err = readExact(br, batch, settles)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && refilling && !(granted && all.reserved && all.settled) {
		// The leases did not hold the round: back to before it used them,
		// and against the counts, every lease folded into them.
		b := &pgx.Batch{}
		b.Queue("ROLLBACK TO SAVEPOINT own")
		s.queueExact(b, batch, settles)
		br := tx.SendBatch(ctx, b)
		_, err = br.Exec()
		if err == nil {
			all, err = readExact(br, batch, settles)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}
	// What the statements for all did not do, one statement per member
	// does, in another round trip.
	rows := make([]reserveRow, len(batch))
	if err == nil && (!all.reserved || !all.settled) {
		b := &pgx.Batch{}
		if !all.reserved {
			for _, it := range batch {
				s.queueReserve(b, it)
			}
		}
		if !all.settled {
			for _, c := range settles {
				s.queueComplete(b, c)
			}
		}
		br := tx.SendBatch(ctx, b)
		for i := range rows {
			if err == nil && !all.reserved {
				err = rows[i].scan(br.QueryRow())
			}
		}
		for i := range souts {
			if err == nil && !all.settled {
				souts[i], err = readComplete(br)
			}
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		failAll(outs, souts, notApplied("write", err))
		return
	}
	if all.settled {
		copy(souts, all.souts)
	}
	kinds := make([]decision, len(batch))
	for i, it := range batch {
		if all.reserved {
			outs[i], kinds[i] = all.outs[i], all.kinds[i]
			continue
		}
		outs[i], kinds[i] = decide(it, &rows[i])
	}
	s.commitRound(ctx, tx, batch, settles, kinds, outs, souts)
}

// commitRound queues the audit entries of a round's decisions (ledger.go)
// and commits its transaction when a member wrote (else the caller's
// deferred rollback ends it), and turns the answers of the members that
// wrote, or that a bound refused, into errors when the commit fails. A
// round whose entries cannot be queued is not applied.
func (s *Store) commitRound(ctx context.Context, tx pgx.Tx, batch []*reservation, settles []*completion, kinds []decision, outs []reserveResult, souts []completeResult) {
	applied := slices.ContainsFunc(souts, func(o completeResult) bool { return o.applied })
	if !applied && !slices.Contains(kinds, decidedReserved) {
		return
	}
	if err := s.appendAudit(ctx, tx, s.roundDrafts(batch, kinds, outs, settles, souts)); err != nil {
		failAll(outs, souts, notApplied("write", err))
		return
	}
	err := tx.Commit(ctx)
	s.committedDecision()
	if err == nil {
		return
	}
	commitErr := atCommit("write", err)
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
	for i := range souts {
		if souts[i].applied {
			souts[i] = completeResult{err: commitErr}
		} else {
			// It may have found the record settled by an earlier member
			// that did not commit: not an answer, only "not applied".
			souts[i] = completeResult{err: notApplied("complete", fmt.Errorf("its round did not commit: %w", err))}
		}
	}
}

// allResults are the answers of a round's statements for all: whether
// each kind applied (a kind with no member did), and then the answers.
type allResults struct {
	reserved, settled bool
	outs              []reserveResult
	kinds             []decision
	souts             []completeResult
}

// queueOwn adds reserveOwn and completeOwn for a round's members.
func (s *Store) queueOwn(b *pgx.Batch, slot string, batch []*reservation, settles []*completion) {
	if len(batch) > 0 {
		b.Queue(s.q.reserveOwn, append(s.reserveArgs(batch), slot)...)
	}
	if len(settles) > 0 {
		b.Queue(s.q.completeOwn, append(completeArgs(settles), slot)...)
	}
}

// queueExact adds the fold of every lease, then reserveAll and
// completeAll for a round's members.
func (s *Store) queueExact(b *pgx.Batch, batch []*reservation, settles []*completion) {
	b.Queue(s.q.lockAllLeases)
	b.Queue(s.q.fold)
	if len(batch) > 0 {
		b.Queue(s.q.reserveAll, s.reserveArgs(batch)...)
	}
	if len(settles) > 0 {
		b.Queue(s.q.completeAll, completeArgs(settles)...)
	}
}

// readExact reads what queueExact queued.
func readExact(br pgx.BatchResults, batch []*reservation, settles []*completion) (allResults, error) {
	if _, err := br.Exec(); err != nil { // lockAllLeases
		return allResults{}, err
	}
	if _, err := br.Exec(); err != nil { // fold
		return allResults{}, err
	}
	return readAll(br, batch, settles)
}

// readAll reads the statements for all of a round (own or against the
// counts, which answer alike).
func readAll(br pgx.BatchResults, batch []*reservation, settles []*completion) (allResults, error) {
	all := allResults{reserved: len(batch) == 0, settled: len(settles) == 0}
	var err error
	if len(batch) > 0 {
		all.reserved, all.outs, all.kinds, err = readReserveAll(br, batch)
	}
	if err == nil && len(settles) > 0 {
		all.settled, all.souts, err = readCompleteAll(br, len(settles))
	}
	return all, err
}

// execEach reads the results of the next n statements of br that return
// no rows, stopping at the first error.
func execEach(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// roundPlan sets the planner for a round's transaction. JIT compilation
// is off: the planner's estimates for the statements over arrays
// (rounds_set.go) are far above jit_above_cost, and compiling them took
// seconds (EXPLAIN ANALYZE: 6.4 s of JIT for a 32-member round that ran
// in under 5 ms). Hash and merge joins are off: the members are a few
// rows, each found through the records' unique indexes, and a hash join
// scans the whole table (which the planner chose while its statistics
// said the table was small, and kept in its cached plan). The settings are
// local to the transaction; jit exists from PostgreSQL 11.
const roundPlan = "SELECT set_config('jit', 'off', true), set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)"

// queueReserve adds one reservation's statement to a batch.
func (s *Store) queueReserve(b *pgx.Batch, it *reservation) {
	b.Queue(s.q.reserve, s.reserveOneArgs(it)...)
}

// reserveOneArgs are the arguments of one reservation's statement
// (queries.reserve), its gate's included (all NULL without one).
func (s *Store) reserveOneArgs(it *reservation) []any {
	size := store.RecordSize(store.Record{Key: it.key, ExecutionID: it.exec.ID, Tool: it.exec.Tool, Fingerprint: it.fingerprint,
		NodeID: it.exec.NodeID, Approval: it.exec.Approval})
	var (
		approvers           []string
		expiresAt           *time.Time
		arguments, metadata []byte
	)
	if g := it.exec.Approval; g != nil {
		approvers, expiresAt, arguments, metadata = g.Approvers, &g.ExpiresAt, []byte(g.Arguments), []byte(g.Metadata)
	}
	return []any{s.cfg.Capacity, it.key.Principal, it.key.Session, it.key.RequestID,
		it.exec.ID, it.exec.Tool, it.fingerprint, it.exec.NodeID, it.exec.StartedAt, it.exec.Quota,
		it.exec.ByteQuota, size + it.exec.Headroom, it.maxBytes, size, it.exec.DedupeWindow.Microseconds(), it.exec.RetryUncertain,
		approvers, expiresAt, arguments, metadata}
}

// roundContext bounds a round by the latest deadline of its members (a
// member that gives up earlier is answered by its own caller), or by
// roundTimeout when one has none. It ends with parent (the Store's).
func roundContext(parent context.Context, batch []*reservation, settles []*completion) (context.Context, context.CancelFunc) {
	var latest time.Time
	members := make([]*pending, 0, len(batch)+len(settles))
	for _, it := range batch {
		members = append(members, &it.pending)
	}
	for _, c := range settles {
		members = append(members, &c.pending)
	}
	for _, p := range members {
		d, ok := p.ctx.Deadline()
		if !ok {
			return context.WithTimeout(parent, roundTimeout)
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(parent, latest)
}
