package fsm_test

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// stamped is c as a proposer stamps it: its time and actor.
func stamped(c fsm.Command, at time.Time, actor string) fsm.Command {
	c.At, c.Actor = at, actor
	return c
}

// gatedEx is a gated execution whose gate expires at expires.
func gatedEx(id string, expires time.Time) store.Execution {
	ex := execution(id, "n1")
	ex.Approval = &store.ApprovalGate{Approvers: []string{"bob", "carol"}, ExpiresAt: expires}
	return ex
}

// auditScript is a run of commands that makes every kind of decision,
// with the entries (kind, actor, execution, status) each must draft.
func auditScript() ([]fsm.Command, []audit.Draft) {
	ex := func(id string) store.Execution { return execution(id, "n1") }
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	cmds := []fsm.Command{
		stamped(fsm.Reserve(key("a"), fp, ex("e-a")), at(1), "n1"),
		stamped(fsm.Reserve(key("a"), fp, ex("e-a2")), at(2), "n1"), // uncertain: nothing
		stamped(fsm.Complete(key("a"), fp, completed("e-a", `1`, at(3))), at(3), "n1"),
		stamped(fsm.Reserve(key("a"), fp, ex("e-a3")), at(4), "n1"), // replay: nothing
		stamped(fsm.Reserve(key("b"), fp, ex("e-b")), at(5), "n2"),
		stamped(fsm.Cancel("e-b", cancelled("e-b", at(6))), at(6), "bob"),
		stamped(fsm.Reserve(key("c"), fp, ex("e-c")), at(7), "n1"),
		stamped(fsm.Reserve(key("d"), fp, ex("e-d")), at(8), "n1"),
		stamped(fsm.Reserve(key("f"), fp, ex("e-f")), at(9), "n1"),
		stamped(fsm.Interrupt("n1"), at(10), "n3"),
		stamped(fsm.Resolve("e-c", store.Resolution{Result: completed("e-c", `2`, at(11)), By: store.ResolvedByProbe}), at(11), "probe"),
		stamped(fsm.Release("e-d", false), at(12), "carol"),
		stamped(fsm.Complete(key("f"), fp, failedWith("e-f", store.StatusTimedOut, "TIMEOUT", at(13))), at(13), "n1"),
		stamped(fsm.Complete(key("f"), fp, completed("e-f", `3`, at(14))), at(14), "n1"), // refused: nothing
		stamped(fsm.SetNode(fsm.NodeInfo{ID: "n4", RaftAddr: "r", HTTPAddr: "h"}), at(15), "n1"),
		stamped(fsm.Admin(string(audit.KindJoin), "n4"), at(15), "admin"),
		stamped(fsm.Reserve(key("g1"), fp, gatedEx("e-g1", at(30))), at(16), "n1"),
		stamped(fsm.Reserve(key("g2"), fp, gatedEx("e-g2", at(30))), at(16), "n1"),
		stamped(fsm.Reserve(key("g3"), fp, gatedEx("e-g3", at(30))), at(16), "n1"),
		stamped(fsm.Decide("e-g1", store.Decision{Kind: store.DecisionApprove, Actor: "bob", At: at(17), NodeID: "n2"}), at(17), "n2"),
		stamped(fsm.Decide("e-g1", store.Decision{Kind: store.DecisionDeny, Actor: "bob", At: at(18)}), at(18), "n2"), // refused: nothing
		stamped(fsm.Decide("e-g2", store.Decision{Kind: store.DecisionDeny, Actor: "carol", Reason: "no", At: at(19)}), at(19), "n1"),
		stamped(fsm.Decide("e-g3", store.Decision{Kind: store.DecisionExpire, Actor: "n1", At: at(20)}), at(20), "n1"), // early: nothing
		stamped(fsm.Decide("e-g3", store.Decision{Kind: store.DecisionApprove, Actor: "bob", At: at(30), NodeID: "n1"}), at(30), "n1"),
	}
	d := func(s int, kind audit.Kind, actor, id, status string) audit.Draft {
		return audit.Draft{Time: at(s), Kind: kind, Actor: actor, ExecutionID: id, Status: status}
	}
	want := []audit.Draft{
		d(1, audit.KindReserved, "alice", "e-a", "running"),
		d(3, audit.KindCompleted, "n1", "e-a", "completed"),
		d(5, audit.KindReserved, "alice", "e-b", "running"),
		d(6, audit.KindCancelled, "bob", "e-b", "cancelled"),
		d(7, audit.KindReserved, "alice", "e-c", "running"),
		d(8, audit.KindReserved, "alice", "e-d", "running"),
		d(9, audit.KindReserved, "alice", "e-f", "running"),
		d(10, audit.KindInterrupted, "n3", "e-c", "interrupted"),
		d(10, audit.KindInterrupted, "n3", "e-d", "interrupted"),
		d(10, audit.KindInterrupted, "n3", "e-f", "interrupted"),
		d(11, audit.KindResolved, "probe", "e-c", "completed"),
		d(12, audit.KindReleased, "carol", "e-d", "released"),
		d(13, audit.KindTimedOut, "n1", "e-f", "timed_out"),
		{Time: at(15), Kind: audit.KindJoin, Actor: "admin", Target: "n4"},
		d(16, audit.KindReserved, "alice", "e-g1", "awaiting_approval"),
		d(16, audit.KindReserved, "alice", "e-g2", "awaiting_approval"),
		d(16, audit.KindReserved, "alice", "e-g3", "awaiting_approval"),
		d(17, audit.KindApproved, "bob", "e-g1", "running"),
		d(19, audit.KindDenied, "carol", "e-g2", "denied"),
		d(30, audit.KindExpired, "bob", "e-g3", "expired"),
	}
	return cmds, want
}

// TestAuditDraftsPerCommand: each decision drafts one entry with its
// kind, actor, time and the execution's fields; replays, refusals and
// member table changes draft none.
func TestAuditDraftsPerCommand(t *testing.T) {
	cmds, want := auditScript()
	x := newProc(t)
	for _, c := range cmds {
		x.apply(c)
	}
	got, cut := x.p.TakeDrafts()
	if !cut.IsZero() || len(got) != len(want) {
		t.Fatalf("drafted %d entries (prune %v), want %d: %+v", len(got), cut, len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if w.ExecutionID != "" {
			w.Principal, w.Tool, w.Fingerprint = "alice", "create_order", fp
		}
		if g != w {
			t.Errorf("entry %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
	if again, _ := x.p.TakeDrafts(); len(again) != 0 {
		t.Fatalf("TakeDrafts kept %d drafts", len(again))
	}
}

// ledgerFSM is an FSM with a ledger in dir.
func ledgerFSM(t *testing.T, dir string) (*fsm.FSM, *fsm.Ledger) {
	t.Helper()
	l, err := fsm.OpenLedger(filepath.Join(dir, "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	f := fsm.New()
	f.SetLedger(l)
	return f, l
}

// scriptLogs puts the audit script's commands into log entries from
// index 1, per entries commands an entry.
func scriptLogs(t *testing.T, per int) []*raft.Log {
	t.Helper()
	cmds, _ := auditScript()
	var logs []*raft.Log
	for i := 0; i < len(cmds); i += per {
		var enc [][]byte
		for _, c := range cmds[i:min(i+per, len(cmds))] {
			enc = append(enc, mustEncode(t, c))
		}
		logs = append(logs, batchLog(uint64(len(logs)+1), mustBatch(t, enc...)))
	}
	return logs
}

func mustExport(t *testing.T, l *fsm.Ledger, after uint64) []byte {
	t.Helper()
	l.Flush()
	var b bytes.Buffer
	if _, err := l.Export(&b, after, fsm.MaxExportLimit); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// mustVerify verifies an export and returns its head.
func mustVerify(t *testing.T, export []byte) audit.Verified {
	t.Helper()
	v, err := audit.Verify(bytes.NewReader(export))
	if err != nil {
		t.Fatalf("the export does not verify: %v\n%s", err, export)
	}
	return v
}

// TestLedgerDeterministic: two replicas given the same log, in ApplyBatch
// calls cut differently, write the same chain, which verifies and ends
// at their heads; so does a log that cuts the same commands into other
// entries (the chain does not cover log indexes).
func TestLedgerDeterministic(t *testing.T) {
	_, want := auditScript()
	a, la := ledgerFSM(t, t.TempDir())
	for _, l := range scriptLogs(t, 2) {
		a.ApplyBatch([]*raft.Log{l})
		la.Flush()
	}
	b, lb := ledgerFSM(t, t.TempDir())
	b.ApplyBatch(scriptLogs(t, 2))
	lb.Flush()
	c, lc := ledgerFSM(t, t.TempDir())
	c.ApplyBatch(scriptLogs(t, 3))
	lc.Flush()
	ea, eb, ec := mustExport(t, la, 0), mustExport(t, lb, 0), mustExport(t, lc, 0)
	if !bytes.Equal(ea, eb) || !bytes.Equal(ea, ec) || la.Head() != lb.Head() {
		t.Fatalf("replicas' chains differ:\n%s\n%s\n%s", ea, eb, ec)
	}
	v := mustVerify(t, ea)
	if v.Head != la.Head() || v.Entries != len(want) || v.Anchor != audit.Start {
		t.Fatalf("verified %+v, head %+v, want %d entries", v, la.Head(), len(want))
	}
	if mustHash(t, a) != mustHash(t, b) {
		t.Fatal("the states differ")
	}
}

// TestLedgerReplayDoesNotDuplicate: after a restart, Raft replays the
// log after its last snapshot into a fresh FSM over the same audit.db;
// the entries already written are not written again, the new ones are.
func TestLedgerReplayDoesNotDuplicate(t *testing.T) {
	dir := t.TempDir()
	logs := scriptLogs(t, 2)
	half := len(logs) / 2
	f, l := ledgerFSM(t, dir)
	f.ApplyBatch(logs[:half])
	l.Flush()
	before := l.Head()
	snap := mustSnapshotBytes(t, f)
	f.ApplyBatch(logs[half : half+2])
	l.Flush()
	mid := l.Head()
	l.Close()

	// The restart: the snapshot at half, then the log after it.
	g, l2 := ledgerFSM(t, dir)
	if l2.Head() != mid {
		t.Fatalf("reopened at %+v, want %+v", l2.Head(), mid)
	}
	if err := g.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if l2.Head() != mid {
		t.Fatalf("restoring its own older snapshot moved the head from %+v to %+v (snapshot at %+v)", mid, l2.Head(), before)
	}
	for _, lg := range logs[half:] {
		g.ApplyBatch([]*raft.Log{lg})
		l2.Flush()
	}

	ref, lref := ledgerFSM(t, t.TempDir())
	ref.ApplyBatch(logs)
	lref.Flush()
	if got, want := mustExport(t, l2, 0), mustExport(t, lref, 0); !bytes.Equal(got, want) {
		t.Fatalf("after the replay:\n%s\nwant\n%s", got, want)
	}
}

// TestLedgerSnapshotCarriesChain: a node that installs another's snapshot
// ends with its chain, and both go on alike.
func TestLedgerSnapshotCarriesChain(t *testing.T) {
	logs := scriptLogs(t, 2)
	a, la := ledgerFSM(t, t.TempDir())
	a.ApplyBatch(logs[:5])
	// No Flush: Snapshot itself waits for the entries queued so far.
	snap := mustSnapshotBytes(t, a)

	b, lb := ledgerFSM(t, t.TempDir())
	// b had applied something else before: the snapshot replaces it
	// (Restore, too, waits for what b had queued).
	b.ApplyBatch(logs[:1])
	if err := b.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if lb.Head() != la.Head() || !bytes.Equal(mustExport(t, lb, 0), mustExport(t, la, 0)) {
		t.Fatalf("after restore: head %+v, want %+v", lb.Head(), la.Head())
	}
	a.ApplyBatch(logs[5:])
	la.Flush()
	b.ApplyBatch(logs[5:])
	lb.Flush()
	if lb.Head() != la.Head() || !bytes.Equal(mustExport(t, lb, 0), mustExport(t, la, 0)) {
		t.Fatalf("after more: head %+v, want %+v", lb.Head(), la.Head())
	}
	mustVerify(t, mustExport(t, lb, 0))
}

// TestLedgerPrune: a prune removes the entries older than its cutoff on
// every replica alike; the export then starts with the checkpoint and
// still verifies, and a snapshot carries the checkpoint.
func TestLedgerPrune(t *testing.T) {
	logs := scriptLogs(t, 4)
	a, la := ledgerFSM(t, t.TempDir())
	a.ApplyBatch(logs)
	la.Flush()
	full := mustExport(t, la, 0)
	head := la.Head()
	prune := batchLog(uint64(len(logs)+1), mustBatch(t, mustEncode(t, stamped(fsm.AuditPrune(t0.Add(6*time.Second)), t0.Add(time.Hour), "n1"))))
	a.ApplyBatch([]*raft.Log{prune})
	la.Flush()
	// Entries at 1, 3, 5 s are gone; the one at 6 s is the first left.
	if cp := la.Checkpoint(); cp.Seq != 3 || la.Head() != head {
		t.Fatalf("checkpoint %+v head %+v, want seq 3 and head %+v", cp, la.Head(), head)
	}
	pruned := mustExport(t, la, 0)
	v := mustVerify(t, pruned)
	if v.Anchor != la.Checkpoint() || v.Head != head || !bytes.HasSuffix(full, pruned[bytes.IndexByte(pruned, '\n')+1:]) {
		t.Fatalf("the pruned export:\n%s", pruned)
	}
	// Entry reads a written entry by its seq, and none that was pruned
	// or not yet written.
	if e, ok, err := la.Entry(head.Seq); err != nil || !ok || e.Seq != head.Seq || e.Hash != head.Hash {
		t.Fatalf("Entry(head %d) = %+v, %v, %v", head.Seq, e, ok, err)
	}
	for _, seq := range []uint64{2, head.Seq + 1} {
		if e, ok, err := la.Entry(seq); err != nil || ok {
			t.Fatalf("Entry(%d) = %+v, %v, %v; want none", seq, e, ok, err)
		}
	}
	// A page after a seq starts with that seq's checkpoint.
	page := mustExport(t, la, 5)
	if v := mustVerify(t, page); v.Anchor.Seq != 5 || v.Head != head {
		t.Fatalf("the page after 5 verified %+v", v)
	}

	b, lb := ledgerFSM(t, t.TempDir())
	if err := b.Restore(io.NopCloser(bytes.NewReader(mustSnapshotBytes(t, a)))); err != nil {
		t.Fatal(err)
	}
	if lb.Checkpoint() != la.Checkpoint() || !bytes.Equal(mustExport(t, lb, 0), pruned) {
		t.Fatalf("restored checkpoint %+v, want %+v", lb.Checkpoint(), la.Checkpoint())
	}
}

func mustSnapshotBytes(t *testing.T, f *fsm.FSM) []byte {
	t.Helper()
	b, err := f.SnapshotBytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLedgerFlushQueued: FlushQueued returns once the entries applied
// before it are written, while applies go on beside it (Flush waits for an
// empty queue), and leaves a head at least theirs.
func TestLedgerFlushQueued(t *testing.T) {
	logs := scriptLogs(t, 1)
	half := len(logs) / 2
	ref, lref := ledgerFSM(t, t.TempDir())
	ref.ApplyBatch(logs[:half])
	lref.Flush()
	want := lref.Head()

	f, l := ledgerFSM(t, t.TempDir())
	f.ApplyBatch(logs[:half])
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, lg := range logs[half:] {
			f.ApplyBatch([]*raft.Log{lg})
		}
	}()
	l.FlushQueued()
	if got := l.Head(); got.Seq < want.Seq {
		t.Fatalf("head %+v after FlushQueued; the entries applied before it end at %+v", got, want)
	}
	<-done
}

// TestLedgerCommitsPaced: entries applied one batch every few
// milliseconds are written in about one commit per commitGap, not one
// each (every commit costs the node's disk its own syncs); and Flush
// still returns with all of them written.
func TestLedgerCommitsPaced(t *testing.T) {
	logs := scriptLogs(t, 1)
	if len(logs) < 20 {
		t.Fatalf("the audit script has %d commands; this test needs 20", len(logs))
	}
	logs = logs[:20]
	f, l := ledgerFSM(t, t.TempDir())
	ref, lref := ledgerFSM(t, t.TempDir())
	ref.ApplyBatch(logs)
	lref.Flush()
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for _, lg := range logs {
		<-tick.C
		f.ApplyBatch([]*raft.Log{lg})
	}
	elapsed := time.Since(start)
	l.Flush()
	if got, want := l.Head(), lref.Head(); got != want {
		t.Fatalf("head after Flush %+v, want %+v", got, want)
	}
	// One commit per 100 ms of applying, one more for Flush, one for luck.
	if c, most := l.Commits(), uint64(elapsed/(100*time.Millisecond))+2; c > most {
		t.Fatalf("%d batches applied over %s were written in %d commits, want at most %d", len(logs), elapsed, c, most)
	}
}
