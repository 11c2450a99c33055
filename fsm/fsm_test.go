package fsm_test

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// commandLog is the log entry at index holding c alone, as a batch of one.
func commandLog(tb testing.TB, index uint64, c fsm.Command) *raft.Log {
	tb.Helper()
	b, err := fsm.EncodeBatch([][]byte{mustEncode(tb, c)})
	if err != nil {
		tb.Fatalf("batch of %s: %v", c.Type, err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b}
}

// only returns the Response of the one command of an entry, from the
// entry's answer out.
func only(tb fataler, out any) fsm.Response {
	tb.Helper()
	rs, ok := out.(fsm.Responses)
	if !ok || len(rs) != 1 {
		tb.Fatalf("answer %#v, want the Responses of one command", out)
	}
	return rs[0]
}

// fakeSink is a raft.SnapshotSink over a buffer.
type fakeSink struct {
	bytes.Buffer
	failWrite         bool
	closed, cancelled bool
}

func (s *fakeSink) ID() string { return "test-snapshot" }

func (s *fakeSink) Write(p []byte) (int, error) {
	if s.failWrite {
		return 0, errors.New("disk full")
	}
	return s.Buffer.Write(p)
}

func (s *fakeSink) Close() error  { s.closed = true; return nil }
func (s *fakeSink) Cancel() error { s.cancelled = true; return nil }

var _ raft.SnapshotSink = (*fakeSink)(nil)

// trackedReader records whether Restore closed it.
type trackedReader struct {
	io.Reader
	closed bool
}

func (r *trackedReader) Close() error { r.closed = true; return nil }

func mustPersist(tb testing.TB, f *fsm.FSM) []byte {
	tb.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		tb.Fatalf("snapshot: %v", err)
	}
	defer snap.Release()
	sink := &fakeSink{}
	if err := snap.Persist(sink); err != nil {
		tb.Fatalf("persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		tb.Fatalf("persist left the sink closed=%v cancelled=%v", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

func mustHash(tb testing.TB, f *fsm.FSM) string {
	tb.Helper()
	h, err := f.Hash()
	if err != nil {
		tb.Fatalf("hash: %v", err)
	}
	return h
}

// populated returns an FSM that applied a few entries at indexes 1 to 8.
func populated(tb testing.TB) *fsm.FSM {
	tb.Helper()
	f := fsm.New()
	logs := []*raft.Log{
		commandLog(tb, 1, fsm.SetNode(fsm.NodeInfo{ID: "n1", RaftAddr: "127.0.0.1:7001", HTTPAddr: "127.0.0.1:8001"})),
		commandLog(tb, 2, fsm.SetLimits(50, 0)),
		commandLog(tb, 3, fsm.Reserve(key("r1"), fp, execution("e1", "n1"))),
		commandLog(tb, 4, fsm.Reserve(key("r2"), fp, execution("e2", "n1"))),
		commandLog(tb, 5, fsm.Complete(key("r1"), fp, completed("e1", `{"v":1}`, t0.Add(time.Second)))),
		commandLog(tb, 6, fsm.Reserve(key("r3"), fp, execution("e3", "n2"))),
		commandLog(tb, 7, fsm.Interrupt("n2")),
		commandLog(tb, 8, fsm.SetNode(fsm.NodeInfo{ID: "n2", RaftAddr: "127.0.0.1:7002", HTTPAddr: "127.0.0.1:8002"})),
	}
	for i, r := range f.ApplyBatch(logs) {
		if err := only(tb, r).Err(); err != nil {
			tb.Fatalf("entry %d: %v", i+1, err)
		}
	}
	return f
}

func TestApplyBatchMixed(t *testing.T) {
	f := fsm.New()
	logs := []*raft.Log{
		commandLog(t, 1, fsm.Reserve(key("r1"), fp, execution("e1", "n1"))),
		{Index: 2, Term: 1, Type: raft.LogConfiguration, Data: []byte("not a command")},
		{Index: 3, Term: 1, Type: raft.LogCommand, Data: []byte(`{"v":1,"type":"explode"}`)},
		{Index: 4, Term: 1, Type: raft.LogCommand, Data: []byte("\xff garbage")},
		commandLog(t, 5, fsm.Reserve(key("r1"), fp, execution("e2", "n1"))),
		{Index: 6, Term: 2, Type: raft.LogNoop},
		{Index: 7, Term: 2, Type: raft.LogBarrier},
		commandLog(t, 8, fsm.Complete(key("r1"), fp, completed("e1", `"ok"`, t0.Add(time.Second)))),
	}
	out := f.ApplyBatch(logs)
	if len(out) != len(logs) {
		t.Fatalf("%d results for %d logs", len(out), len(logs))
	}
	for _, i := range []int{1, 5, 6} {
		if out[i] != nil {
			t.Errorf("result of a %v entry: %#v, want nil", logs[i].Type, out[i])
		}
	}
	if reserved := only(t, out[0]); reserved.Outcome != store.Reserved || reserved.Record.Seq != fsm.Token(1, 0) {
		t.Fatalf("reserve: %#v", out[0])
	}
	for _, i := range []int{2, 3} {
		r, ok := out[i].(fsm.Response)
		if !ok || r.Code != store.CodeInvalidRequest || !errors.Is(r.Err(), store.ErrInvalid) || r.Message == "" {
			t.Fatalf("undecodable entry %d: %#v", logs[i].Index, out[i])
		}
	}
	if r := only(t, out[4]); r.Outcome != store.Uncertain || r.Record.ExecutionID != "e1" {
		t.Fatalf("second reserve: %+v", r)
	}
	if r := only(t, out[7]); r.Err() != nil || r.Record.Status != store.StatusCompleted {
		t.Fatalf("complete: %+v", r)
	}
	if got := f.AppliedIndex(); got != 8 {
		t.Fatalf("AppliedIndex %d, want 8", got)
	}
	if st := f.Stats(); st.Entries != 1 || st.Capacity != fsm.DefaultCapacity {
		t.Fatalf("stats %+v", st)
	}
}

// The last entry of a batch may be no command at all; the applied index
// still moves to it.
func TestAppliedIndexFollowsNonCommandEntries(t *testing.T) {
	f := fsm.New()
	f.ApplyBatch([]*raft.Log{
		commandLog(t, 3, fsm.Interrupt("n1")),
		{Index: 4, Type: raft.LogConfiguration},
	})
	if got := f.AppliedIndex(); got != 4 {
		t.Fatalf("AppliedIndex %d, want 4", got)
	}
	if r := f.Apply(commandLog(t, 5, fsm.Interrupt("n1"))); only(t, r).Count != 0 {
		t.Fatalf("Apply: %#v", r)
	}
	if got := f.AppliedIndex(); got != 5 {
		t.Fatalf("AppliedIndex %d after Apply, want 5", got)
	}
	if out := f.ApplyBatch(nil); len(out) != 0 || f.AppliedIndex() != 5 {
		t.Fatalf("empty batch: %v, index %d", out, f.AppliedIndex())
	}
}

func TestApplyMatchesApplyBatch(t *testing.T) {
	a, b := fsm.New(), fsm.New()
	logs := []*raft.Log{
		commandLog(t, 1, fsm.Reserve(key("r1"), fp, execution("e1", "n1"))),
		commandLog(t, 2, fsm.Reserve(key("r2"), fp, execution("e2", "n1"))),
		{Index: 3, Type: raft.LogCommand, Data: []byte("{")},
		commandLog(t, 4, fsm.Release("e2", true)),
	}
	batch := a.ApplyBatch(logs)
	for i, l := range logs {
		one := b.Apply(l)
		if !bytes.Equal(mustJSON(t, one), mustJSON(t, batch[i])) {
			t.Fatalf("entry %d: Apply %#v, ApplyBatch %#v", l.Index, one, batch[i])
		}
	}
	if mustHash(t, a) != mustHash(t, b) {
		t.Fatal("Apply and ApplyBatch reached different states")
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestWaitApplied(t *testing.T) {
	f := fsm.New()
	if !isClosed(f.WaitApplied(0)) {
		t.Fatal("WaitApplied(0) not closed on a fresh FSM")
	}
	w3, w5, w5b, w9 := f.WaitApplied(3), f.WaitApplied(5), f.WaitApplied(5), f.WaitApplied(9)
	f.ApplyBatch([]*raft.Log{commandLog(t, 1, fsm.Interrupt("x")), commandLog(t, 2, fsm.Interrupt("x"))})
	if isClosed(w3) || isClosed(w5) {
		t.Fatal("a waiter woke before its index")
	}
	f.ApplyBatch([]*raft.Log{commandLog(t, 3, fsm.Interrupt("x"))})
	if !isClosed(w3) || isClosed(w5) {
		t.Fatalf("at 3: w3 closed=%v w5 closed=%v", isClosed(w3), isClosed(w5))
	}
	// A batch that jumps past an index wakes its waiters.
	f.ApplyBatch([]*raft.Log{{Index: 4, Type: raft.LogNoop}, {Index: 6, Type: raft.LogConfiguration}})
	if !isClosed(w5) || !isClosed(w5b) || isClosed(w9) {
		t.Fatal("at 6: waiters for 5 not woken, or the waiter for 9 woken")
	}
	// Already reached: closed at once.
	for _, i := range []uint64{1, 5, 6} {
		if !isClosed(f.WaitApplied(i)) {
			t.Fatalf("WaitApplied(%d) at 6 not closed", i)
		}
	}
	// SetApplied (after a snapshot restore) wakes waiters and never moves
	// the index back.
	f.SetApplied(9)
	if !isClosed(w9) || f.AppliedIndex() != 9 {
		t.Fatalf("SetApplied(9): closed=%v index=%d", isClosed(w9), f.AppliedIndex())
	}
	f.SetApplied(2)
	if f.AppliedIndex() != 9 {
		t.Fatalf("SetApplied(2) moved the index back to %d", f.AppliedIndex())
	}
}

// Waiters registered from many goroutines while entries are applied all
// wake: none misses the index it waits for.
func TestWaitAppliedConcurrent(t *testing.T) {
	f := fsm.New()
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-f.WaitApplied(uint64(i%50 + 1))
		})
	}
	for i := uint64(1); i <= 50; i++ {
		f.Apply(commandLog(t, i, fsm.Interrupt("x")))
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("waiters still blocked after every index was applied")
	}
}

// The observer sees every command of the types it observes, in order, and
// no other (Release is not observed here).
func TestObserverSeesObservedCommandsInOrder(t *testing.T) {
	f := fsm.New()
	type seen struct {
		index uint64
		typ   fsm.Type
		resp  fsm.Response
		// the state the observer could read: the command is applied
		entries int
	}
	var got []seen
	f.Observe(func(index uint64, c fsm.Command, r fsm.Response) {
		got = append(got, seen{index, c.Type, r, f.Stats().Entries})
	}, fsm.TypeReserve, fsm.TypeCancel, fsm.TypeComplete)
	out := f.ApplyBatch([]*raft.Log{
		commandLog(t, 1, fsm.Reserve(key("r1"), fp, execution("e1", "n1"))),
		{Index: 2, Type: raft.LogConfiguration},
		commandLog(t, 3, fsm.Cancel("e1", cancelled("e1", t0.Add(time.Second)))),
		{Index: 4, Type: raft.LogCommand, Data: []byte("garbage")},
		commandLog(t, 5, fsm.Complete(key("r1"), fp, completed("e1", `1`, t0.Add(time.Minute)))),
	})
	f.Apply(commandLog(t, 6, fsm.Release("e1", true)))

	want := []struct {
		index   uint64
		typ     fsm.Type
		out     fsm.Response
		entries int
	}{
		{1, fsm.TypeReserve, only(t, out[0]), 1},
		{3, fsm.TypeCancel, only(t, out[2]), 1},
		{5, fsm.TypeComplete, only(t, out[4]), 1},
	}
	if len(got) != len(want) {
		t.Fatalf("observer saw %d commands, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.index != w.index || g.typ != w.typ || g.entries != w.entries {
			t.Errorf("observation %d: index %d type %s entries %d, want %d %s %d",
				i, g.index, g.typ, g.entries, w.index, w.typ, w.entries)
		}
		if !bytes.Equal(mustJSON(t, g.resp), mustJSON(t, w.out)) {
			t.Errorf("observation %d: response %+v, Apply returned %+v", i, g.resp, w.out)
		}
	}
	if got[1].resp.Record.Status != store.StatusCancelled {
		t.Errorf("cancel observed with %+v", got[1].resp)
	}
	if !errors.Is(got[2].resp.Err(), store.ErrInvalidState) {
		t.Errorf("late complete observed with %v", got[2].resp.Err())
	}
}

func TestSnapshotPersistRestore(t *testing.T) {
	f := populated(t)
	b := mustPersist(t, f)
	if sb, err := f.SnapshotBytes(); err != nil || !bytes.Equal(sb, b) {
		t.Fatalf("SnapshotBytes differs from the persisted snapshot (%v)", err)
	}

	g := fsm.New()
	rc := &trackedReader{Reader: bytes.NewReader(b)}
	if err := g.Restore(rc); err != nil {
		t.Fatal(err)
	}
	if !rc.closed {
		t.Fatal("Restore did not close the snapshot reader")
	}
	if mustHash(t, g) != mustHash(t, f) {
		t.Fatal("restored FSM has another hash")
	}
	if g.AppliedIndex() != f.AppliedIndex() || g.AppliedIndex() == 0 {
		t.Fatalf("restored applied index %d, want the snapshot's %d", g.AppliedIndex(), f.AppliedIndex())
	}
	if got, err := g.Get("e1"); err != nil || got.Status != store.StatusCompleted {
		t.Fatalf("Get(e1) after restore: %+v, %v", got, err)
	}
	if got, err := g.Lookup(key("r3")); err != nil || got.Status != store.StatusInterrupted {
		t.Fatalf("Lookup(r3) after restore: %+v, %v", got, err)
	}
	if !slices.Equal(g.Nodes(), f.Nodes()) {
		t.Fatalf("nodes %+v, want %+v", g.Nodes(), f.Nodes())
	}
	if n, ok := g.Node("n2"); !ok || n.RaftAddr != "127.0.0.1:7002" {
		t.Fatalf("Node(n2) = %+v, %v", n, ok)
	}
	if g.Stats() != f.Stats() || g.Stats().Capacity != 50 {
		t.Fatalf("stats %+v, want %+v", g.Stats(), f.Stats())
	}
	if p := g.List(store.ListQuery{Principal: "alice", Session: "s1"}); len(p.Records) != 3 || p.Records[0].ExecutionID != "e3" {
		t.Fatalf("List after restore: %+v", p)
	}

	// Both go on alike.
	next := []*raft.Log{
		commandLog(t, 9, fsm.Reserve(key("r4"), fp, execution("e4", "n1"))),
		commandLog(t, 10, fsm.Release("e3", false)),
	}
	f.ApplyBatch(next)
	g.ApplyBatch(next)
	if mustHash(t, g) != mustHash(t, f) {
		t.Fatal("FSMs diverged after the restore")
	}
}

func TestPersistCancelsOnWriteError(t *testing.T) {
	snap, err := populated(t).Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &fakeSink{failWrite: true}
	if err := snap.Persist(sink); err == nil {
		t.Fatal("Persist ignored a write error")
	}
	if !sink.cancelled {
		t.Fatal("Persist did not cancel the sink after a write error")
	}
	snap.Release()
}

// A snapshot is taken at a point: entries applied after Snapshot returns
// are not in it.
func TestSnapshotIsAPointInTime(t *testing.T) {
	f := populated(t)
	want := mustHash(t, f)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	f.Apply(commandLog(t, 9, fsm.Reserve(key("late"), fp, execution("e-late", "n1"))))
	sink := &fakeSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	g := fsm.New()
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if mustHash(t, g) != want {
		t.Fatal("the snapshot holds entries applied after it was taken")
	}
}

func TestRestoreFailureKeepsTheState(t *testing.T) {
	for name, b := range badSnapshots() {
		t.Run(name, func(t *testing.T) {
			f := populated(t)
			before := mustHash(t, f)
			rc := &trackedReader{Reader: bytes.NewReader(b)}
			if err := f.Restore(rc); err == nil {
				t.Fatal("Restore accepted a bad snapshot")
			}
			if !rc.closed {
				t.Fatal("a failed Restore did not close the reader")
			}
			if got := mustHash(t, f); got != before {
				t.Fatal("a failed Restore changed the state")
			}
			if f.AppliedIndex() != 8 {
				t.Fatalf("a failed Restore moved the applied index to %d", f.AppliedIndex())
			}
			if r := f.Apply(commandLog(t, 9, fsm.Reserve(key("r9"), fp, execution("e9", "n1")))); only(t, r).Outcome != store.Reserved {
				t.Fatalf("apply after a failed Restore: %#v", r)
			}
		})
	}
}

// Reads run from other goroutines while Raft applies and restores; run
// with -race.
func TestReadsConcurrentWithApply(t *testing.T) {
	f := fsm.New()
	snapshot := mustPersist(t, populated(t))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	reader := func(read func() error) {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := read(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	reader(func() error {
		r, err := f.Get("e1")
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err == nil && r.ExecutionID != "e1" {
			return errors.New("Get returned another record")
		}
		return nil
	})
	reader(func() error {
		r, err := f.Lookup(key("r2"))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err == nil && r.Key != key("r2") {
			return errors.New("Lookup returned another record")
		}
		return nil
	})
	reader(func() error {
		p := f.List(store.ListQuery{Principal: "alice", Session: "s1", Limit: 10})
		for i := 1; i < len(p.Records); i++ {
			if p.Records[i-1].Seq <= p.Records[i].Seq {
				return errors.New("List not newest first")
			}
		}
		return nil
	})
	reader(func() error {
		st := f.Stats()
		if st.Entries < 0 || st.Capacity <= 0 {
			return errors.New("impossible stats")
		}
		_ = f.Nodes()
		_, _ = f.Node("n1")
		_ = f.AppliedIndex()
		return nil
	})
	reader(func() error {
		_, err := f.Hash()
		return err
	})

	index := uint64(0)
	next := func() uint64 { index++; return index }
	for round := range 30 {
		var logs []*raft.Log
		for i := range 10 {
			id := string(rune('a'+i)) + strconv.Itoa(round)
			logs = append(logs,
				commandLog(t, next(), fsm.Reserve(key(id), fp, execution("e-"+id, "n1"))),
				commandLog(t, next(), fsm.Complete(key(id), fp, completed("e-"+id, `1`, t0))))
		}
		logs = append(logs, commandLog(t, next(), fsm.SetNode(fsm.NodeInfo{ID: "n1", RaftAddr: strconv.Itoa(round)})))
		f.ApplyBatch(logs)
		switch round % 10 {
		case 4:
			f.Apply(commandLog(t, next(), fsm.Expire(t0.Add(time.Second))))
		case 9:
			// Raft restores on its apply goroutine too.
			if err := f.Restore(io.NopCloser(bytes.NewReader(snapshot))); err != nil {
				t.Error(err)
			}
		}
		if _, err := f.Snapshot(); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
}
