package fsm

import (
	"sync"
	"time"
)

// The ledger's writes leave Raft's apply goroutine: applying a batch only
// queues its entries (enqueue), and one goroutine commits what is queued,
// all of it in one transaction (so the commits, each with its fsync, batch
// up under load rather than each stall the applies behind it). Measured
// with scripts/bench on a 3-node cluster, writing on the apply goroutine
// cost about a third of new calls/s.
//
// What that changes, and why it is safe:
//   - The ledger may stand a little behind the applied index: readers
//     (GET /v1/audit) see entries a moment after the state, never a
//     different chain.
//   - A snapshot must carry the ledger as of its index: FSM.Snapshot
//     flushes the queue first (it runs on the apply goroutine, so nothing
//     is queued meanwhile). Restore flushes too before it replaces the
//     ledger.
//   - A crash loses what was queued, and Raft replays the log after its
//     last snapshot, which covers it: the ledger's index says where the
//     written entries end.
//   - The queue is bounded (maxQueued drafts): past it, enqueue waits for
//     the writer, so a slow disk slows applies rather than grow memory.
//   - Commits are paced (commitGap): each costs its own fsyncs, on the disk
//     the Raft log syncs to as well, so a writer that committed as soon
//     as anything was queued would double the node's syncs under load.
//     The entries wait at most commitGap longer to be read; nothing waits
//     for them but Flush and FlushQueued, which cut the pause short, as a
//     full queue and stop do.

// maxQueued bounds the drafts queued for the writer.
const maxQueued = 1 << 16

// commitGap is the least time from the start of one ledger commit to the
// start of the next, unless something waits for the writer.
const commitGap = 100 * time.Millisecond

// ledgerQueue is the writer's queue and its state, guarded by mu.
type ledgerQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond // signalled on every change of what follows
	groups  []ledgerGroup
	drafts  int  // drafts in groups
	writing bool // the writer holds groups it took and has not written
	// queued and written count the groups ever queued and ever written
	// (or whose write failed), for FlushQueued.
	queued, written uint64
	closed          bool
	done            chan struct{} // closed when the writer has stopped
	// hurry cuts the writer's pause between commits short (capacity 1).
	hurry chan struct{}
	// commits counts the writer's commits (tests).
	commits uint64
}

// rush asks the writer to commit what is queued without its pause.
func (q *ledgerQueue) rush() {
	select {
	case q.hurry <- struct{}{}:
	default:
	}
}

// start starts l's writer.
func (l *Ledger) start() {
	q := &l.q
	q.cond = sync.NewCond(&q.mu)
	q.done = make(chan struct{})
	q.hurry = make(chan struct{}, 1)
	go l.writer()
}

// enqueue queues groups for the writer, waiting while maxQueued drafts
// are queued already.
func (l *Ledger) enqueue(groups []ledgerGroup) {
	n := 0
	for _, g := range groups {
		n += len(g.drafts)
	}
	q := &l.q
	q.mu.Lock()
	for q.drafts > 0 && q.drafts+n > maxQueued && !q.closed {
		q.rush()
		q.cond.Wait()
	}
	if !q.closed {
		q.groups = append(q.groups, groups...)
		q.drafts += n
		q.queued += uint64(len(groups))
		q.cond.Broadcast()
	}
	q.mu.Unlock()
}

// Flush waits until everything queued so far is written (or its write
// failed: Err).
func (l *Ledger) Flush() {
	q := &l.q
	q.mu.Lock()
	for (len(q.groups) > 0 || q.writing) && !q.closed {
		q.rush()
		q.cond.Wait()
	}
	q.mu.Unlock()
}

// FlushQueued waits until the entries queued before the call are written
// (or their write failed: Err). Unlike Flush it does not wait for what is
// queued meanwhile, so it returns under sustained load too: the head it
// leaves is at least the head of the entries applied when it was called.
func (l *Ledger) FlushQueued() {
	q := &l.q
	q.mu.Lock()
	target := q.queued
	for q.written < target && !q.closed {
		q.rush()
		q.cond.Wait()
	}
	q.mu.Unlock()
}

// writer commits what is queued, all of it at once, until Close.
func (l *Ledger) writer() {
	q := &l.q
	defer close(q.done)
	for {
		q.mu.Lock()
		for len(q.groups) == 0 && !q.closed {
			q.cond.Wait()
		}
		if len(q.groups) == 0 && q.closed {
			q.mu.Unlock()
			return
		}
		groups := q.groups
		q.groups, q.drafts, q.writing = nil, 0, true
		q.commits++
		q.cond.Broadcast()
		q.mu.Unlock()

		began := time.Now()
		l.write(groups)

		q.mu.Lock()
		q.writing = false
		q.written += uint64(len(groups))
		q.cond.Broadcast()
		closed := q.closed
		q.mu.Unlock()
		if wait := commitGap - time.Since(began); wait > 0 && !closed {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-q.hurry:
			}
			t.Stop()
		}
	}
}

// stop writes what is queued and stops the writer.
func (l *Ledger) stop() {
	q := &l.q
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
	q.rush()
	<-q.done
}
