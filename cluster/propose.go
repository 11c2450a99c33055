package cluster

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// proposer is the leader's group commit. It hands commands to Raft in
// rounds, one round at a time: while a round is being committed, new
// commands (local ones and those forwarded by followers) wait, and then go
// to Raft together as the next round.
//
// A round is one Raft log entry, a batch (fsm.EncodeBatch) of all of its
// commands in order, unless it is over maxEntryBytes or
// fsm.MaxBatchCommands, when it takes several. So the costs Raft pays per
// entry (a log record, a msgpack frame, a follower append, an apply
// dispatch) are paid once per round, not once per command, on every node.
// Raft writes what it takes from its queue at once, one append to the
// log's WAL (one fdatasync, package raftlog) on every node, and sends it with one
// AppendEntries per follower. A command waits at most for the round in
// flight (docs/performance.md).
type proposer struct {
	r       *raft.Raft
	metrics *nodeMetrics

	mu      sync.Mutex
	queue   []*proposal
	running bool // a round is being committed
}

// maxEntryBytes bounds a batch entry's commands together; a command
// larger than that (up to peer.MaxCommandBytes) goes alone in its entry. It
// keeps an entry to about a MiB, and so an AppendEntries of up to
// maxAppendEntries of them to tens of MiB, even when many large results
// complete at once; ordinary rounds (a few hundred commands of a few
// hundred bytes) are far below it.
const maxEntryBytes = 1 << 20

// proposal is one command waiting for its round. done receives its
// outcome once its entry is applied (or failed).
type proposal struct {
	data    []byte
	timeout time.Duration
	done    chan proposalResult
}

// proposalResult is a proposal's outcome: its Response, or an error
// classified as applyError says.
type proposalResult struct {
	resp fsm.Response
	err  error
}

func newProposal(data []byte, timeout time.Duration) *proposal {
	return &proposal{data: data, timeout: timeout, done: make(chan proposalResult, 1)}
}

func newProposer(r *raft.Raft, m *nodeMetrics) *proposer { return &proposer{r: r, metrics: m} }

// propose queues items; each one's done gets its outcome when its round
// is over.
func (p *proposer) propose(items ...*proposal) {
	p.mu.Lock()
	p.queue = append(p.queue, items...)
	if p.running {
		p.mu.Unlock()
		return
	}
	batch := p.queue
	p.queue, p.running = nil, true
	p.mu.Unlock()
	go p.run(batch)
}

// run commits batch, then, round after round, what queued meanwhile,
// until nothing is left.
func (p *proposer) run(batch []*proposal) {
	var entries []entryFuture
	for {
		p.metrics.roundCommands.Observe(float64(len(batch)))
		entries = entries[:0]
		for rest := batch; len(rest) > 0; {
			n := entryLen(rest)
			entries = append(entries, p.apply(rest[:n]))
			rest = rest[n:]
		}
		for _, e := range entries {
			e.deliver() // the round ends when every entry is applied
		}
		p.mu.Lock()
		if len(p.queue) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		batch = p.queue
		p.queue = nil
		p.mu.Unlock()
	}
}

// entryLen is how many of q's first proposals go in one entry (at least
// one): up to fsm.MaxBatchCommands of them and maxEntryBytes together.
func entryLen(q []*proposal) int {
	n, size := 0, 0
	for n < len(q) && n < fsm.MaxBatchCommands {
		size += len(q[n].data)
		if n > 0 && size > maxEntryBytes {
			break
		}
		n++
	}
	return n
}

// entryFuture is one batch entry handed to Raft and the proposals it
// carries, in order.
type entryFuture struct {
	f     raft.ApplyFuture
	items []*proposal
	err   error // the entry could not be built (not sent)
}

// apply hands items to Raft as one batch entry. Raft's enqueue timeout is
// the longest of theirs.
func (p *proposer) apply(items []*proposal) entryFuture {
	cmds := make([][]byte, len(items))
	timeout := time.Duration(0)
	for i, it := range items {
		cmds[i] = it.data
		timeout = max(timeout, it.timeout)
	}
	entry, err := fsm.EncodeBatch(cmds)
	if err != nil {
		return entryFuture{items: items, err: fmt.Errorf("%w: %w", store.ErrInvalid, err)} // not reached: entryLen bounds the count
	}
	return entryFuture{f: p.r.Apply(entry, timeout), items: items}
}

// deliver waits for the entry and gives each proposal its outcome: its
// own Response, or the entry's error for all of them.
func (e entryFuture) deliver() {
	err := e.err
	var rs fsm.Responses
	if err == nil {
		err = applyError(e.f.Error())
	}
	if err == nil {
		switch r := e.f.Response().(type) {
		case fsm.Responses:
			if len(r) != len(e.items) {
				err = fmt.Errorf("%w: %d responses for %d commands", store.ErrCommitUnknown, len(r), len(e.items))
			}
			rs = r
		case fsm.Response:
			// The entry was committed but could not be read: every
			// command of it gets that refusal.
			rs = make(fsm.Responses, len(e.items))
			for i := range rs {
				rs[i] = r
			}
		default:
			// Applied, but its outcome cannot be read.
			err = fmt.Errorf("%w: unexpected apply response %T", store.ErrCommitUnknown, e.f.Response())
		}
	}
	for i, it := range e.items {
		if err != nil {
			it.done <- proposalResult{err: err}
			continue
		}
		it.done <- proposalResult{resp: rs[i]}
	}
}

// applyError classifies an apply future's error by whether the entry may
// have been committed: peer.ErrNotLeader and store.ErrUnavailable mean it was
// not, store.ErrCommitUnknown that it may have been.
func applyError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return peer.ErrNotLeader
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: raft is overloaded", store.ErrUnavailable)
	}
	// ErrLeadershipLost, ErrRaftShutdown, ErrAbortedByRestore: the entry
	// may be in the log of the next leader.
	return fmt.Errorf("%w: %w", store.ErrCommitUnknown, err)
}
