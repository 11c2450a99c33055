package raftlog

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// heldStore is a log store whose writes wait until released, and which
// records how many writes it took and of what size.
type heldStore struct {
	*raft.InmemStore
	hold    chan struct{} // a write proceeds when this is closed or receives
	started chan int      // told the size of each write as it starts
	fail    atomic.Pointer[error]
	mu      sync.Mutex
	sizes   []int
	freed   sync.Once
}

// newTestLeaderLog returns a QueuedLog over a heldStore, leading while
// leader says so (always when leader is nil). The test's end releases the
// store's writes and closes the log.
func newTestLeaderLog(t *testing.T, leader *atomic.Bool) (*heldStore, *QueuedLog) {
	s := &heldStore{InmemStore: raft.NewInmemStore(), hold: make(chan struct{}), started: make(chan int, 64)}
	l := NewQueuedLog(s, "raft.db")
	if leader == nil {
		leader = new(atomic.Bool)
		leader.Store(true)
	}
	l.SetLeaderCheck(leader.Load)
	t.Cleanup(func() {
		s.releaseAll()
		_ = l.Close()
	})
	return s, l
}

// releaseAll lets every write, held or to come, proceed.
func (s *heldStore) releaseAll() { s.freed.Do(func() { close(s.hold) }) }

func (s *heldStore) StoreLogs(logs []*raft.Log) error {
	s.started <- len(logs)
	<-s.hold
	if err := s.fail.Load(); err != nil {
		return *err
	}
	s.mu.Lock()
	s.sizes = append(s.sizes, len(logs))
	s.mu.Unlock()
	return s.InmemStore.StoreLogs(logs)
}

func (s *heldStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *heldStore) writes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.sizes...)
}

func logsFrom(first, n uint64) []*raft.Log {
	out := make([]*raft.Log, n)
	for i := range out {
		out[i] = &raft.Log{Index: first + uint64(i), Term: 1, Type: raft.LogCommand, Data: []byte{byte(first) + byte(i)}}
	}
	return out
}

// within fails the test unless fn returns within a generous deadline.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}

// returnsWhenReleased checks that fn, which waits behind the store's held
// write, does not return while the write is held and does once it is let
// through.
func returnsWhenReleased(t *testing.T, s *heldStore, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) while the leader's write was still held", what, err)
	case <-time.After(50 * time.Millisecond):
		// Not a proof of waiting, but a returned call is a proof of
		// not waiting; the release below must then end it.
	}
	s.hold <- struct{}{}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return after the write was released", what)
	}
}

func TestLeaderLogQueuesLeaderWrites(t *testing.T) {
	var leader atomic.Bool
	leader.Store(true)
	s, l := newTestLeaderLog(t, &leader)

	within(t, "a leader's StoreLogs", func() {
		if err := l.StoreLogs(logsFrom(1, 3)); err != nil {
			t.Errorf("StoreLogs: %v", err)
		}
	})
	if n := <-s.started; n != 3 {
		t.Fatalf("the writer wrote %d entries, want 3", n)
	}
	// Queued, not on disk: readable, counted, held back from commits.
	var got raft.Log
	if err := l.GetLog(2, &got); err != nil || got.Index != 2 || got.Data[0] != 2 {
		t.Fatalf("GetLog(2) = %+v, %v; want the queued entry", got, err)
	}
	if last, _ := l.LastIndex(); last != 3 {
		t.Fatalf("LastIndex = %d, want 3 (queued)", last)
	}
	if first, _ := l.FirstIndex(); first != 1 {
		t.Fatalf("FirstIndex = %d, want 1 (queued)", first)
	}
	if c := l.commitCap(3); c != 0 {
		t.Fatalf("commitCap(3) = %d while entries 1–3 are not on disk, want 0", c)
	}
	// More rounds queue behind the write in progress and go in one.
	within(t, "a second StoreLogs", func() { _ = l.StoreLogs(logsFrom(4, 2)) })
	within(t, "a third StoreLogs", func() { _ = l.StoreLogs(logsFrom(6, 1)) })

	returnsWhenReleased(t, s, "waitDurable(3)", func() error { return l.waitDurable(3) })
	if c := l.commitCap(9); c != 3 {
		t.Fatalf("commitCap(9) = %d with 1–3 on disk and 4–6 queued, want 3", c)
	}
	if n := <-s.started; n != 3 {
		t.Fatalf("the second write took %d entries, want 3 (two rounds at once)", n)
	}
	returnsWhenReleased(t, s, "waitDurable(6)", func() error { return l.waitDurable(6) })
	if c := l.commitCap(6); c != 6 {
		t.Fatalf("commitCap(6) = %d with everything on disk, want 6", c)
	}
	if w := s.writes(); len(w) != 2 || w[0] != 3 || w[1] != 3 {
		t.Fatalf("writes = %v, want [3 3]", w)
	}
	if err := l.waitDurable(100); err != nil {
		t.Fatalf("waitDurable past the end: %v", err)
	}
	s.releaseAll()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLeaderLogFollowerWritesAreSynchronousAndOrdered(t *testing.T) {
	var leader atomic.Bool
	leader.Store(true)
	s, l := newTestLeaderLog(t, &leader)
	within(t, "a leader's StoreLogs", func() { _ = l.StoreLogs(logsFrom(1, 2)) })
	<-s.started

	// Stepped down: what it appends now is acknowledged to a leader, so
	// it returns only once on disk, after what it queued as leader.
	leader.Store(false)
	done := make(chan error, 1)
	go func() { done <- l.StoreLogs(logsFrom(3, 1)) }()
	select {
	case err := <-done:
		t.Fatalf("a follower's StoreLogs returned (%v) before the queue was written", err)
	case <-time.After(50 * time.Millisecond):
	}
	s.hold <- struct{}{} // the queued write
	if n := <-s.started; n != 1 {
		t.Fatalf("the follower's write took %d entries, want 1", n)
	}
	select {
	case err := <-done:
		t.Fatalf("a follower's StoreLogs returned (%v) before its own write ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	s.hold <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w := s.writes(); len(w) != 2 || w[0] != 2 || w[1] != 1 {
		t.Fatalf("writes = %v, want [2 1] in that order", w)
	}
}

func TestLeaderLogDeleteRangeAfterQueue(t *testing.T) {
	s, l := newTestLeaderLog(t, nil)
	within(t, "StoreLogs", func() { _ = l.StoreLogs(logsFrom(1, 4)) })
	<-s.started
	// A truncation must not run before the queued entries land, or they
	// would come back after it.
	returnsWhenReleased(t, s, "DeleteRange(3, 4)", func() error { return l.DeleteRange(3, 4) })
	if last, _ := l.LastIndex(); last != 2 {
		t.Fatalf("LastIndex after truncation = %d, want 2", last)
	}
	var got raft.Log
	if err := l.GetLog(3, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(3) after truncation: %v, want ErrLogNotFound", err)
	}
}

func TestLeaderLogWriteFailureIsFatal(t *testing.T) {
	s, l := newTestLeaderLog(t, nil)
	boom := errors.New("disk full")
	s.fail.Store(&boom)
	within(t, "StoreLogs", func() { _ = l.StoreLogs(logsFrom(1, 2)) })
	<-s.started
	s.hold <- struct{}{}
	var err error
	within(t, "waitDurable", func() { err = l.waitDurable(1) })
	if !errors.Is(err, boom) {
		t.Fatalf("waitDurable = %v, want the write's failure", err)
	}
	if c := l.commitCap(2); c != 0 {
		t.Fatalf("commitCap = %d after a failed write, want 0: nothing may be applied past it", c)
	}
	if err := l.StoreLogs(logsFrom(3, 1)); !errors.Is(err, boom) {
		t.Fatalf("StoreLogs after a failure = %v, want the failure", err)
	}
	if err := l.DeleteRange(1, 2); !errors.Is(err, boom) {
		t.Fatalf("DeleteRange after a failure = %v, want the failure", err)
	}
	// The gate stops the node rather than apply past it.
	defer func() {
		if recover() == nil {
			t.Fatal("gatedFSM applied an entry the log could not write")
		}
	}()
	within(t, "close", func() {
		if err := l.Close(); !errors.Is(err, boom) {
			t.Errorf("close = %v, want the failure", err)
		}
	})
	gatedFSM{log: l}.wait(1)
}

func TestLeaderLogCloseWritesTheQueue(t *testing.T) {
	s, l := newTestLeaderLog(t, nil)
	s.releaseAll()
	for i := uint64(0); i < 10; i++ {
		if err := l.StoreLogs(logsFrom(1+2*i, 2)); err != nil {
			t.Fatal(err)
		}
	}
	within(t, "close", func() {
		if err := l.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if last, _ := s.InmemStore.LastIndex(); last != 20 {
		t.Fatalf("the store holds up to %d after close, want 20", last)
	}
	if err := l.StoreLogs(logsFrom(21, 1)); !errors.Is(err, errLogClosed) {
		t.Fatalf("StoreLogs after close = %v, want errLogClosed", err)
	}
}

func TestCappedTransportLowersCommitIndex(t *testing.T) {
	s, l := newTestLeaderLog(t, nil)
	within(t, "StoreLogs", func() { _ = l.StoreLogs(logsFrom(5, 2)) })
	<-s.started
	tr := cappedTransport{log: l}
	req := &raft.AppendEntriesRequest{LeaderCommitIndex: 6, Entries: logsFrom(5, 2)}
	got := tr.capped(req)
	if got.LeaderCommitIndex != 4 || len(got.Entries) != 2 {
		t.Fatalf("capped = commit %d with %d entries, want commit 4 and the entries", got.LeaderCommitIndex, len(got.Entries))
	}
	if req.LeaderCommitIndex != 6 {
		t.Fatal("capped changed Raft's own request")
	}
	hb := &raft.AppendEntriesRequest{}
	if tr.capped(hb) != hb {
		t.Fatal("a heartbeat (no commit index) was copied")
	}
	s.hold <- struct{}{}
	within(t, "waitDurable", func() { _ = l.waitDurable(6) })
	if got := tr.capped(req); got != req {
		t.Fatalf("capped = %d with everything on disk, want Raft's request as is", got.LeaderCommitIndex)
	}
}
