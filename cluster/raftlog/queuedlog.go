package raftlog

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// QueuedLog is the Raft log store beneath Raft's log cache: it lets the
// leader write its Raft log while its followers write theirs, instead of
// before it sends them anything.
//
// hashicorp/raft writes a new entry to the leader's log store, and only
// when that returns sends it to the followers, which write it in turn: a
// commit waits for two disk writes in a row, and the leader's main loop
// can do nothing else (take an acknowledgement, commit the round before)
// while its write lasts. QueuedLog takes the leader's writes into a queue
// and returns at once; one goroutine writes what is queued to the store
// beneath (several rounds in one transaction when they pile up), so the
// leader's disk write and the followers' overlap.
//
// Raft then counts the leader's copy toward a quorum before it is on
// disk, so QueuedLog holds back what that would expose. Nothing is
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
// A queued write that fails for want of space (ENOSPC, EDQUOT: diskFull)
// is retried, with a backoff of 100 ms doubling to 1 s, until it succeeds
// or the node stops: Raft has sent the entries and counted them, and they
// reach the disk once there is room. Meanwhile the log is stalled
// (stalled): nothing behind the failed write is applied on any node
// (waitDurable, commitCap), writes from any other state fail at once with
// the disk-full error instead of waiting behind it (Raft's main loop must
// not block: a follower's append is refused and its leader sends it
// again), and the node refuses new calls and hands its leadership to
// another voter (the cluster package watches Stalled and Changed).
//
// A queued write that fails otherwise is fatal to the node: the node
// cannot go on as if the entries were stored. waitDurable then reports
// the failure, and gatedFSM stops the process rather than apply on top of
// a log it does not have.
type QueuedLog struct {
	store    raft.LogStore
	file     string      // the store's file, for messages
	isLeader func() bool // reports whether Raft is in the leader state

	mu      sync.Mutex
	written *sync.Cond    // signalled whenever the queue shrinks, fails or stalls
	work    *sync.Cond    // signalled whenever the queue grows or closes
	queue   [][]*raft.Log // batches not yet on disk, in index order
	failed  error         // set once, by a write that failed for good
	closed  bool
	done    chan struct{} // closed when the writer goroutine ends

	// stall is the disk-full error of the write being retried, or of the
	// last synchronous write when it failed so; nil once a write succeeds.
	// since is when it began. changed receives (without blocking) each
	// time the log stalls or recovers.
	stall   atomic.Pointer[stallState]
	changed chan struct{}
	// queueStall is closed when the leader's queued write stalls, and
	// replaced by an open channel when the log writes again (QueueStall).
	queueStall atomic.Pointer[chan struct{}]
	// giveUp is closed by Abandon: a write that fails for want of space
	// is no longer retried, as the node is stopping.
	giveUp   chan struct{}
	giveOnce sync.Once

	// space, when set (SetSpaceCheck), is called after each queued write
	// and reports whether the disk keeps room for the writes on their way
	// (WAL.EnsureMargin); low is set while it fails.
	space func() error
	low   bool
}

// stallState is a stalled log's cause and start.
type stallState struct {
	err   error
	since time.Time
	queue bool // the leader's queued write is the one retried
}

// New starts the writer goroutine over store (whose file is
// file, named in errors); close stops it. isLeader may be set later
// (SetLeaderCheck), before Raft runs: until then every write is
// synchronous.
func NewQueuedLog(store raft.LogStore, file string) *QueuedLog {
	l := &QueuedLog{store: store, file: file, isLeader: func() bool { return false }, done: make(chan struct{}),
		changed: make(chan struct{}, 1), giveUp: make(chan struct{})}
	l.written = sync.NewCond(&l.mu)
	l.work = sync.NewCond(&l.mu)
	open := make(chan struct{})
	l.queueStall.Store(&open)
	go l.run()
	return l
}

// SetLeaderCheck installs the function that tells whether a write comes
// from the leader. It must be called before Raft starts.
func (l *QueuedLog) SetLeaderCheck(isLeader func() bool) { l.isLeader = isLeader }

// SetSpaceCheck installs check, called after each queued write (and, while
// it fails, every diskFullRetryMin): while it returns a disk-full error,
// the log counts as stalled as if the queued write had failed (Stalled,
// QueueStalled: the node refuses new calls and hands leadership over),
// though the queued writes go on, into the room check keeps (the WAL's
// margin), so that the entries already on their way (a tool's outcome)
// are written. A synchronous append (a follower's) calls check first,
// and fails with its error rather than write into that room. It must be
// called before Raft starts.
func (l *QueuedLog) SetSpaceCheck(check func() error) {
	l.space = check
	go l.recheckSpace()
}

// checkSpace runs the space check after a queued write succeeded, and
// stalls or frees the log by its outcome. l.mu is held, and released
// during the check.
func (l *QueuedLog) checkSpace() {
	if l.space == nil {
		l.setStall(nil, false)
		return
	}
	l.mu.Unlock()
	err := l.space()
	l.mu.Lock()
	if err != nil && DiskFull(err) {
		l.low = true
		l.setStall(fmt.Errorf("cluster: the raft log %s is written into its last margin: the disk is full: %w", l.file, err), true)
		return
	}
	l.low = false
	l.setStall(nil, false)
}

// recheckSpace runs the space check every diskFullRetryMin while it fails
// and nothing is queued (a queued write runs it itself), until the writer
// ends.
func (l *QueuedLog) recheckSpace() {
	t := time.NewTicker(diskFullRetryMin)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-t.C:
		}
		l.mu.Lock()
		if l.low && len(l.queue) == 0 && !l.closed {
			l.checkSpace()
		}
		l.mu.Unlock()
	}
}

// errLogClosed is returned by writes after close, and by waitDurable for
// entries the log gave up writing because the node stopped on a full disk.
var errLogClosed = errors.New("cluster: the raft log is closed")

// DiskFull reports whether err is a file system out of space or over its
// quota. The errno is matched when wrapped (BoltDB returns the write's
// *fs.PathError as is); its text when not, as BoltDB formats a failed
// file resize with %s.
func DiskFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error())
}

// Changed receives (without blocking; one pending at most) each time the
// log stalls on a full disk or writes again.
func (l *QueuedLog) Changed() <-chan struct{} { return l.changed }

// Stalled returns since when the log is stalled on a full disk, and the
// disk-full error; a nil error when it writes.
func (l *QueuedLog) Stalled() (time.Time, error) {
	if s := l.stall.Load(); s != nil {
		return s.since, s.err
	}
	return time.Time{}, nil
}

// QueueStalled reports whether the leader's queue waits for disk space,
// so that nothing more can be applied until there is room.
func (l *QueuedLog) QueueStalled() bool {
	s := l.stall.Load()
	return s != nil && s.queue
}

// QueueStall returns a channel that is closed once the leader's queue
// waits for disk space (QueueStalled): at once if it does now. Whoever
// waits on it is told the moment a queued write fails for want of space,
// not at its next poll. Once the log writes again a new, open channel is
// returned; one taken before may then be closed while the queue no longer
// waits, so a receiver checks QueueStalled.
func (l *QueuedLog) QueueStall() <-chan struct{} { return *l.queueStall.Load() }

// setStall records a disk-full error (nil: writing again) and tells
// changed when the state changes, and queueStall when the leader's queue
// stalls. l.mu is held, so that its changes are made one at a time.
func (l *QueuedLog) setStall(err error, queue bool) {
	old := l.stall.Load()
	if err == nil && old == nil || err != nil && old != nil && old.queue == queue {
		return // unchanged (still stalled: keep its start)
	}
	wasQueue, isQueue := old != nil && old.queue, err != nil && queue
	if wasQueue && !isQueue {
		open := make(chan struct{})
		l.queueStall.Store(&open) // before the state: a receiver that sees no stall finds it open
	}
	if err == nil {
		l.stall.Store(nil)
	} else {
		since := time.Now()
		if old != nil {
			since = old.since
		}
		l.stall.Store(&stallState{err: err, since: since, queue: queue})
	}
	if isQueue && !wasQueue {
		close(*l.queueStall.Load()) // after the state: a receiver sees the stall
	}
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// The retry backoff of a write that failed for want of space: from
// diskFullRetryMin, doubling to DiskFullRetryMax.
const (
	diskFullRetryMin = 100 * time.Millisecond
	DiskFullRetryMax = time.Second
)

// run writes the queue, everything in it at once, until close or a
// write fails for good. A write that fails for want of space is retried.
func (l *QueuedLog) run() {
	defer close(l.done)
	l.mu.Lock()
	defer l.mu.Unlock()
	wait := diskFullRetryMin
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
		first, last := logs[0].Index, logs[len(logs)-1].Index
		if err != nil && DiskFull(err) {
			// They stay queued, and are written again once there is
			// room; meanwhile whatever waits on them waits, and the
			// synchronous writes fail at once (drain).
			err = fmt.Errorf("cluster: writing raft log entries %d–%d to %s: the disk is full: %w", first, last, l.file, err)
			l.setStall(err, true)
			l.written.Broadcast()
			if l.givingUp() {
				l.failed = fmt.Errorf("%w: the node stops with entries %d–%d not written: %w", errLogClosed, first, last, err)
				l.written.Broadcast()
				return
			}
			l.mu.Unlock()
			select {
			case <-time.After(wait):
			case <-l.giveUp:
			}
			l.mu.Lock()
			wait = min(2*wait, DiskFullRetryMax)
			continue
		}
		if err != nil {
			// They stay queued: they are not on disk, and what waits on
			// them hears why. Nothing more is written.
			l.failed = fmt.Errorf("cluster: writing raft log entries %d–%d to %s failed, and not for want of space (so the node stops rather than wait for room): %w", first, last, l.file, err)
			l.written.Broadcast()
			return
		}
		wait = diskFullRetryMin
		l.queue = l.queue[n:]
		l.written.Broadcast()
		l.checkSpace()
	}
}

// gaveUp reports whether the writer gave up entries it could not write
// for want of space (the node is stopping).
func (l *QueuedLog) gaveUp() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Is(l.failed, errLogClosed)
}

// givingUp reports whether Abandon (or Close) was called.
func (l *QueuedLog) givingUp() bool {
	select {
	case <-l.giveUp:
		return true
	default:
		return false
	}
}

// Abandon makes the writer give up, rather than retry, a write that fails
// for want of space: the node is stopping. What waits on such a write
// then hears errLogClosed. It does nothing else; close stops the writer.
func (l *QueuedLog) Abandon() {
	l.giveOnce.Do(func() { close(l.giveUp) })
	l.mu.Lock()
	l.work.Broadcast()
	l.mu.Unlock()
}

// drain waits until nothing is queued, and returns the write failure if
// there was one, or the disk-full error when the queue waits for space: a
// synchronous write fails at once then rather than block Raft behind it.
// l.mu is held.
func (l *QueuedLog) drain() error {
	for len(l.queue) > 0 && l.failed == nil && !l.QueueStalled() {
		l.written.Wait()
	}
	if l.failed != nil {
		return l.failed
	}
	if len(l.queue) > 0 {
		_, err := l.Stalled()
		return err
	}
	return nil
}

// StoreLog implements raft.LogStore.
func (l *QueuedLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// StoreLogs implements raft.LogStore: queued when Raft leads, else
// written synchronously after what is queued.
func (l *QueuedLog) StoreLogs(logs []*raft.Log) error {
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
	first, last := logs[0].Index, logs[len(logs)-1].Index
	if l.space != nil {
		// A follower's margin is not for its own appends: they fail
		// (and its leader sends them again) once it cannot be kept.
		if err := l.space(); DiskFull(err) {
			return l.synchronous(err, "appending raft log entries %d–%d", first, last)
		}
	}
	return l.synchronous(l.store.StoreLogs(logs), "appending raft log entries %d–%d", first, last)
}

// synchronous notes the outcome of a synchronous write, described by
// format and args: a disk-full error stalls the log until a write
// succeeds. It returns err, described when the disk is full.
func (l *QueuedLog) synchronous(err error, format string, args ...any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil && DiskFull(err) {
		err = fmt.Errorf("cluster: %s to %s: the disk is full: %w", fmt.Sprintf(format, args...), l.file, err)
		if !l.QueueStalled() {
			l.setStall(err, false)
		}
		return err
	}
	if err == nil && !l.QueueStalled() {
		l.setStall(nil, false)
	}
	return err
}

// waitDurable waits until every entry up to index is written, and returns
// the write failure if one of them cannot be. While the disk is full it
// waits for room; once the log gives up (Abandon), the error matches
// errLogClosed.
func (l *QueuedLog) waitDurable(index uint64) error {
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
func (l *QueuedLog) commitCap(commit uint64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) > 0 {
		return min(commit, l.queue[0][0].Index-1)
	}
	return commit
}

// GetLog implements raft.LogStore, reading queued entries too.
func (l *QueuedLog) GetLog(index uint64, log *raft.Log) error {
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
func (l *QueuedLog) FirstIndex() (uint64, error) {
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
func (l *QueuedLog) LastIndex() (uint64, error) {
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
func (l *QueuedLog) DeleteRange(min, max uint64) error {
	l.mu.Lock()
	err := l.drain()
	l.mu.Unlock()
	if err != nil {
		return err
	}
	return l.synchronous(l.store.DeleteRange(min, max), "deleting raft log entries %d–%d", min, max)
}

// IsMonotonic implements raft.MonotonicLogStore as the store beneath does.
func (l *QueuedLog) IsMonotonic() bool {
	m, ok := l.store.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// Close writes what is queued and stops the writer; later writes fail.
// A write failing for want of space is given up (Abandon). It returns the
// write failure, if there was one.
func (l *QueuedLog) Close() error {
	l.Abandon()
	l.mu.Lock()
	l.closed = true
	l.work.Broadcast()
	l.mu.Unlock()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}
