package cluster

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// leaderLog lets the leader write its Raft log while its followers write
// theirs, instead of before it sends them anything.
//
// hashicorp/raft writes a new entry to the leader's log store, and only
// when that returns sends it to the followers, which write it in turn: a
// commit waits for two disk writes in a row, and the leader's main loop
// can do nothing else (take an acknowledgement, commit the round before)
// while its write lasts. leaderLog takes the leader's writes into a queue
// and returns at once; one goroutine writes what is queued to the store
// beneath (several rounds in one transaction when they pile up), so the
// leader's disk write and the followers' overlap.
//
// Raft then counts the leader's copy toward a quorum before it is on
// disk, so leaderLog holds back what that would expose. Nothing is
// applied, on any node, before the leader's copy is durable too:
//   - the leader's state machine applies an entry only once the entry is
//     written here (waitDurable, called by gatedFSM before every apply);
//   - a follower learns an entry is committed only from the commit index
//     the leader sends it, which commitCap lowers below the first entry
//     not yet written here (cappedTransport);
//
// so an entry is applied, answered or read only when the leader and
// enough followers to make a quorum with it hold it on disk, as when the
// leader wrote first. An entry Raft counted as committed but the leader
// lost in a crash before writing was applied nowhere and answered to
// nobody: it is an entry whose outcome its proposer never learned, which
// Raft may keep (a follower holding it becomes leader) or drop.
//
// Writes from any other state (a follower appending what its leader
// sent, a bootstrap) are synchronous, after everything queued: a
// follower acknowledges only what it holds on disk. So are deletions and
// every read that must see the queue: the queue is drained first, or
// read through.
//
// A queued write that fails is fatal to the node: Raft has sent the
// entries and counted them, so the node cannot go on as if they were
// stored. waitDurable then reports the failure, and gatedFSM stops the
// process rather than apply on top of a log it does not have.
type leaderLog struct {
	store    raft.LogStore
	isLeader func() bool // reports whether Raft is in the leader state

	mu      sync.Mutex
	written *sync.Cond    // signalled whenever the queue shrinks or fails
	work    *sync.Cond    // signalled whenever the queue grows or closes
	queue   [][]*raft.Log // batches not yet on disk, in index order
	failed  error         // set once, by a write that failed
	closed  bool
	done    chan struct{} // closed when the writer goroutine ends
}

// newLeaderLog starts the writer goroutine over store; close stops it.
// isLeader may be set later (setLeaderCheck), before Raft runs: until
// then every write is synchronous.
func newLeaderLog(store raft.LogStore) *leaderLog {
	l := &leaderLog{store: store, isLeader: func() bool { return false }, done: make(chan struct{})}
	l.written = sync.NewCond(&l.mu)
	l.work = sync.NewCond(&l.mu)
	go l.run()
	return l
}

// setLeaderCheck installs the function that tells whether a write comes
// from the leader. It must be called before Raft starts.
func (l *leaderLog) setLeaderCheck(isLeader func() bool) { l.isLeader = isLeader }

// errLogClosed is returned by writes after close.
var errLogClosed = errors.New("cluster: the raft log is closed")

// run writes the queue, everything in it at once, until close or a
// write fails.
func (l *leaderLog) run() {
	defer close(l.done)
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		for len(l.queue) == 0 && !l.closed {
			l.work.Wait()
		}
		if len(l.queue) == 0 {
			return // closed and drained
		}
		n := len(l.queue)
		var logs []*raft.Log
		for _, b := range l.queue {
			logs = append(logs, b...)
		}
		l.mu.Unlock()
		err := l.store.StoreLogs(logs)
		l.mu.Lock()
		if err != nil {
			// They stay queued: they are not on disk, and what waits on
			// them hears why. Nothing more is written.
			l.failed = fmt.Errorf("cluster: writing raft log entries %d–%d: %w", logs[0].Index, logs[len(logs)-1].Index, err)
			l.written.Broadcast()
			return
		}
		l.queue = l.queue[n:]
		l.written.Broadcast()
	}
}

// drain waits until nothing is queued, and returns the write failure if
// there was one. l.mu is held.
func (l *leaderLog) drain() error {
	for len(l.queue) > 0 && l.failed == nil {
		l.written.Wait()
	}
	return l.failed
}

// StoreLog implements raft.LogStore.
func (l *leaderLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// StoreLogs implements raft.LogStore: queued when Raft leads, else
// written synchronously after what is queued.
func (l *leaderLog) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	l.mu.Lock()
	if l.failed != nil {
		defer l.mu.Unlock()
		return l.failed
	}
	if l.closed {
		l.mu.Unlock()
		return errLogClosed
	}
	if l.isLeader() {
		l.queue = append(l.queue, logs)
		l.work.Signal()
		l.mu.Unlock()
		return nil
	}
	if err := l.drain(); err != nil {
		l.mu.Unlock()
		return err
	}
	l.mu.Unlock()
	return l.store.StoreLogs(logs)
}

// waitDurable waits until every entry up to index is written, and returns
// the write failure if one of them cannot be.
func (l *leaderLog) waitDurable(index uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.queue) > 0 && l.queue[0][0].Index <= index && l.failed == nil {
		l.written.Wait()
	}
	if len(l.queue) > 0 && l.queue[0][0].Index <= index {
		return l.failed
	}
	return nil
}

// commitCap lowers a commit index the leader sends a follower below the
// first entry not yet written here.
func (l *leaderLog) commitCap(commit uint64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) > 0 {
		return min(commit, l.queue[0][0].Index-1)
	}
	return commit
}

// GetLog implements raft.LogStore, reading queued entries too.
func (l *leaderLog) GetLog(index uint64, log *raft.Log) error {
	l.mu.Lock()
	for _, b := range l.queue {
		if first, last := b[0].Index, b[len(b)-1].Index; index >= first && index <= last {
			if e := b[index-first]; e.Index == index {
				*log = *e
				l.mu.Unlock()
				return nil
			}
		}
	}
	l.mu.Unlock()
	return l.store.GetLog(index, log)
}

// FirstIndex implements raft.LogStore.
func (l *leaderLog) FirstIndex() (uint64, error) {
	first, err := l.store.FirstIndex()
	if err != nil || first != 0 {
		return first, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) > 0 {
		return l.queue[0][0].Index, nil
	}
	return 0, nil
}

// LastIndex implements raft.LogStore, counting queued entries.
func (l *leaderLog) LastIndex() (uint64, error) {
	l.mu.Lock()
	if n := len(l.queue); n > 0 {
		b := l.queue[n-1]
		l.mu.Unlock()
		return b[len(b)-1].Index, nil
	}
	l.mu.Unlock()
	return l.store.LastIndex()
}

// DeleteRange implements raft.LogStore, after what is queued is written
// (a follower truncating a conflicting suffix must not see it come back).
func (l *leaderLog) DeleteRange(min, max uint64) error {
	l.mu.Lock()
	err := l.drain()
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return l.store.DeleteRange(min, max)
}

// IsMonotonic implements raft.MonotonicLogStore as the store beneath does.
func (l *leaderLog) IsMonotonic() bool {
	m, ok := l.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// close writes what is queued and stops the writer; later writes fail.
// It returns the write failure, if there was one.
func (l *leaderLog) close() error {
	l.mu.Lock()
	l.closed = true
	l.work.Broadcast()
	l.mu.Unlock()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}
