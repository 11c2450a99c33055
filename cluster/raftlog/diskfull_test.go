package raftlog

import (
	"errors"
	"io/fs"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// fullableStore is a log store whose disk can fill: while full is set,
// every write fails with the error BoltDB returns for a write the file
// system has no room for. attempts counts the writes tried.
type fullableStore struct {
	*raft.InmemStore
	full     atomic.Pointer[error]
	attempts atomic.Int32
}

func (s *fullableStore) fail(err error) { s.full.Store(&err) }
func (s *fullableStore) heal()          { s.full.Store(nil) }

func (s *fullableStore) err() error {
	if p := s.full.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *fullableStore) StoreLogs(logs []*raft.Log) error {
	s.attempts.Add(1)
	if err := s.err(); err != nil {
		return err
	}
	return s.InmemStore.StoreLogs(logs)
}

func (s *fullableStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *fullableStore) DeleteRange(min, max uint64) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.InmemStore.DeleteRange(min, max)
}

// enospc is a write failing for want of space, as BoltDB returns it.
var enospc = &fs.PathError{Op: "write", Path: "/data/raft.db", Err: syscall.ENOSPC}

func newFullableLeaderLog(t *testing.T) (*fullableStore, *QueuedLog, *atomic.Bool) {
	s := &fullableStore{InmemStore: raft.NewInmemStore()}
	l := NewQueuedLog(s, "/data/raft.db")
	var leader atomic.Bool
	leader.Store(true)
	l.SetLeaderCheck(leader.Load)
	t.Cleanup(func() { _ = l.Close() })
	return s, l, &leader
}

func TestDiskFullClassification(t *testing.T) {
	for _, c := range []struct {
		err  error
		full bool
	}{
		{enospc, true},
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.EDQUOT}, true},
		{errors.New("file resize error: no space left on device"), true}, // BoltDB's %s
		{&fs.PathError{Op: "write", Path: "x", Err: syscall.EIO}, false},
		{errors.New("disk full"), false},
		{nil, false},
	} {
		if got := DiskFull(c.err); got != c.full {
			t.Errorf("DiskFull(%v) = %v, want %v", c.err, got, c.full)
		}
	}
}

// TestLeaderLogRetriesWhenDiskFull checks that a leader's queued write
// that fails for want of space is retried until there is room, and that
// meanwhile nothing behind it is applied or acknowledged: waitDurable
// waits, commitCap holds, and synchronous writes (a follower's append, a
// truncation) fail at once with the disk-full error instead of blocking.
func TestLeaderLogRetriesWhenDiskFull(t *testing.T) {
	s, l, leader := newFullableLeaderLog(t)
	if err := l.StoreLogs(logsFrom(1, 2)); err != nil {
		t.Fatal(err)
	}
	within(t, "the first write", func() { _ = l.waitDurable(2) })

	s.fail(enospc)
	if err := l.StoreLogs(logsFrom(3, 2)); err != nil {
		t.Fatalf("a leader's StoreLogs on a full disk: %v (want it queued)", err)
	}
	wait.Until(t, 10*time.Second, "the log to stall", func() bool { return l.QueueStalled() })
	since, err := l.Stalled()
	if !errors.Is(err, syscall.ENOSPC) || since.IsZero() || !strings.Contains(err.Error(), "/data/raft.db") || !strings.Contains(err.Error(), "3–4") {
		t.Fatalf("stalled() = %v, %v; want ENOSPC naming the file and entries 3–4", err, since)
	}
	select {
	case <-l.changed:
	default:
		t.Fatal("changed was not told of the stall")
	}
	durable := make(chan error, 1)
	go func() { durable <- l.waitDurable(4) }()
	// More rounds queue behind it, readable and counted.
	if err := l.StoreLogs(logsFrom(5, 1)); err != nil {
		t.Fatal(err)
	}
	if last, _ := l.LastIndex(); last != 5 {
		t.Fatalf("LastIndex = %d, want 5", last)
	}
	var got raft.Log
	if err := l.GetLog(3, &got); err != nil || got.Index != 3 {
		t.Fatalf("GetLog(3) = %+v, %v", got, err)
	}
	if c := l.commitCap(5); c != 2 {
		t.Fatalf("commitCap(5) = %d while 3–5 wait for space, want 2", c)
	}
	// Synchronous writes fail fast.
	leader.Store(false)
	within(t, "a follower's StoreLogs behind a stalled queue", func() {
		if err := l.StoreLogs(logsFrom(6, 1)); !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("a follower's StoreLogs = %v, want the disk-full error", err)
		}
	})
	within(t, "DeleteRange behind a stalled queue", func() {
		if err := l.DeleteRange(4, 5); !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("DeleteRange = %v, want the disk-full error", err)
		}
	})
	leader.Store(true)
	// It keeps trying.
	n := s.attempts.Load()
	wait.Until(t, 10*time.Second, "the write to be tried again", func() bool { return s.attempts.Load() >= n+2 })
	select {
	case err := <-durable:
		t.Fatalf("waitDurable(4) returned (%v) while the disk was full", err)
	default:
	}

	s.heal()
	select {
	case err := <-durable:
		if err != nil {
			t.Fatalf("waitDurable(4) after room came back: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waitDurable(4) did not return within 5 s of room coming back")
	}
	within(t, "waitDurable(5)", func() {
		if err := l.waitDurable(5); err != nil {
			t.Errorf("waitDurable(5): %v", err)
		}
	})
	if _, err := l.Stalled(); err != nil || l.QueueStalled() {
		t.Fatalf("still stalled after the write: %v", err)
	}
	if last, _ := s.InmemStore.LastIndex(); last != 5 {
		t.Fatalf("the store holds up to %d, want 5", last)
	}
	if c := l.commitCap(5); c != 5 {
		t.Fatalf("commitCap(5) = %d after the write, want 5", c)
	}
	leader.Store(false)
	if err := l.StoreLogs(logsFrom(6, 1)); err != nil {
		t.Fatalf("a follower's StoreLogs after room came back: %v", err)
	}
}

// TestLeaderLogFollowerDiskFull checks that a follower's synchronous write
// failing for want of space marks the log stalled (for the gauge) but not
// its queue (the node does not refuse calls: it forwards them), until a
// write succeeds.
func TestLeaderLogFollowerDiskFull(t *testing.T) {
	s, l, leader := newFullableLeaderLog(t)
	leader.Store(false)
	s.fail(enospc)
	if err := l.StoreLogs(logsFrom(1, 1)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("StoreLogs = %v, want ENOSPC", err)
	}
	if _, err := l.Stalled(); !errors.Is(err, syscall.ENOSPC) || l.QueueStalled() {
		t.Fatalf("stalled() = %v, QueueStalled = %v; want ENOSPC, false", err, l.QueueStalled())
	}
	s.heal()
	if err := l.StoreLogs(logsFrom(1, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Stalled(); err != nil {
		t.Fatalf("stalled() = %v after a write succeeded", err)
	}
}

// TestLeaderLogOtherWriteErrorIsFatal checks that a queued write failing
// otherwise than for space is not retried, and that the gate stops the
// node with a message naming the entries, the file and the cause.
func TestLeaderLogOtherWriteErrorIsFatal(t *testing.T) {
	s, l, _ := newFullableLeaderLog(t)
	eio := &fs.PathError{Op: "write", Path: "/data/raft.db", Err: syscall.EIO}
	s.fail(eio)
	if err := l.StoreLogs(logsFrom(1, 2)); err != nil {
		t.Fatal(err)
	}
	var err error
	within(t, "waitDurable", func() { err = l.waitDurable(1) })
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("waitDurable = %v, want EIO", err)
	}
	tried := s.attempts.Load()
	time.Sleep(3 * diskFullRetryMin) // a retry would come within this
	if got := s.attempts.Load(); got != tried {
		t.Fatalf("a write failing with EIO was tried again (%d attempts, then %d)", tried, got)
	}
	if l.QueueStalled() {
		t.Fatal("an EIO stalled the log as if the disk were full")
	}
	defer func() {
		msg, _ := recover().(string)
		for _, want := range []string{"entry 2", "entries 1–2", "/data/raft.db", "not for want of space", "input/output error"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the panic %q does not say %q", msg, want)
			}
		}
	}()
	_ = gatedFSM{log: l}.wait(2)
}

// TestLeaderLogAbandonOnFullDisk checks that a node stopping while its
// log waits for space is not held by it: the writer gives up, what waits
// hears errLogClosed, the gate applies nothing (and does not panic), and
// no snapshot is taken of the state that skipped entries.
func TestLeaderLogAbandonOnFullDisk(t *testing.T) {
	s, l, _ := newFullableLeaderLog(t)
	s.fail(enospc)
	if err := l.StoreLogs(logsFrom(1, 2)); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 10*time.Second, "the log to stall", l.QueueStalled)
	applied := make(chan error, 1)
	go func() { applied <- gatedFSM{log: l}.wait(2) }()
	l.Abandon()
	select {
	case err := <-applied:
		if !errors.Is(err, errLogClosed) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("the gate = %v, want errLogClosed with the disk-full error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the gate still waits after abandon")
	}
	if _, err := (gatedFSM{log: l}).Snapshot(); !errors.Is(err, errLogClosed) {
		t.Fatalf("Snapshot after giving up = %v, want errLogClosed", err)
	}
	within(t, "close", func() {
		if err := l.Close(); !errors.Is(err, errLogClosed) {
			t.Errorf("close = %v, want errLogClosed", err)
		}
	})
}

// TestLeaderLogQueueStallTells checks QueueStall: its channel stays open
// while the log writes and while only a follower's write fails, is closed
// the moment the leader's queued write fails for want of space (with
// QueueStalled already true), and is open again once the log writes.
func TestLeaderLogQueueStallTells(t *testing.T) {
	s, l, leader := newFullableLeaderLog(t)
	open := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
			t.Fatalf("QueueStall is closed %s", what)
		default:
		}
	}
	stall := l.QueueStall()
	open("while the log writes", stall)
	leader.Store(false)
	s.fail(enospc)
	if err := l.StoreLogs(logsFrom(1, 1)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a follower's StoreLogs = %v, want ENOSPC", err)
	}
	open("when a follower's write fails", stall)

	leader.Store(true)
	if err := l.StoreLogs(logsFrom(1, 1)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stall:
	case <-time.After(10 * time.Second):
		t.Fatal("QueueStall was not closed when the queued write failed for want of space")
	}
	if !l.QueueStalled() {
		t.Fatal("QueueStall closed, but QueueStalled is false")
	}
	if again := l.QueueStall(); again != stall {
		t.Fatal("QueueStall gave another channel while the queue is still stalled")
	}

	s.heal()
	wait.Until(t, 10*time.Second, "the queued write to go through", func() bool { return !l.QueueStalled() })
	open("once the log writes again", l.QueueStall())
}
