package fsm_test

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

func TestSnapshotRestoresExactly(t *testing.T) {
	x := seeded(t)
	x.mustReserve("res", "e-res", "n2")
	x.mustOK(fsm.Interrupt("n2"))
	x.mustOK(fsm.Resolve("e-res", store.Resolution{Result: completed("e-res", `[1,2]`, t0.Add(time.Hour)), By: store.ResolvedByProbe}))
	x.mustReserve("res2", "e-res2", "n2")
	x.mustOK(fsm.Interrupt("n2"))
	x.mustOK(fsm.Resolve("e-res2", store.Resolution{Result: completed("e-res2", `3`, t0.Add(time.Hour))}))
	// Gated records: one awaiting, one approved, one denied.
	for _, id := range []string{"e-gate1", "e-gate2", "e-gate3"} {
		ex := execution(id, "n1")
		ex.Approval = &store.ApprovalGate{Approvers: []string{"bob"}, ExpiresAt: t0.Add(time.Hour)}
		x.mustOK(fsm.Reserve(key(id), fp, ex))
	}
	x.mustOK(fsm.Decide("e-gate2", store.Decision{Kind: store.DecisionApprove, Actor: "bob", At: t0.Add(time.Minute), NodeID: "n2"}))
	x.mustOK(fsm.Decide("e-gate3", store.Decision{Kind: store.DecisionDeny, Actor: "bob", Reason: "no", At: t0.Add(time.Minute)}))
	b := x.snapshot()

	p := mustRestore(t, b)
	if !p.Equal(x.p) || !x.p.Equal(p) {
		t.Fatal("restored processor differs")
	}
	if got := mustSnapshot(t, p); !bytes.Equal(got, b) {
		t.Fatalf("snapshot of the restored processor differs:\n%s\n%s", got, b)
	}
	if p.State().Capacity() != 10 || !p.CapacitySet() || p.State().LastSeq() != x.p.State().LastSeq() || len(p.Nodes()) != 2 {
		t.Fatalf("restored capacity %d, last seq %d, nodes %+v",
			p.State().Capacity(), p.State().LastSeq(), p.Nodes())
	}
	if r, err := p.State().Get("e-res"); err != nil || !r.Resolved || r.ResolvedBy != store.ResolvedByProbe || string(r.Data) != `[1,2]` {
		t.Fatalf("restored resolved record: %+v, %v", r, err)
	}
	if r, err := p.State().Get("e-res2"); err != nil || !r.Resolved || r.ResolvedBy != "" {
		t.Fatalf("restored record resolved by nobody named: %+v, %v", r, err)
	}
	if r, err := p.State().Get("e-gate1"); err != nil || r.Status != store.StatusAwaitingApproval || r.Approval == nil || r.Approval.Approvers[0] != "bob" {
		t.Fatalf("restored awaiting record: %+v, %v", r, err)
	}
	if r, err := p.State().Get("e-gate2"); err != nil || r.Status != store.StatusRunning || r.NodeID != "n2" || r.Decision == nil || r.Decision.By != "bob" {
		t.Fatalf("restored approved record: %+v, %v", r, err)
	}
	if r, err := p.State().Get("e-gate3"); err != nil || r.Status != store.StatusDenied || r.Decision == nil || r.Decision.Reason != "no" {
		t.Fatalf("restored denied record: %+v, %v", r, err)
	}

	// Both go on alike: the next entries give the same answers.
	next := x.index + 1
	for _, c := range []fsm.Command{
		fsm.Reserve(key("after"), fp, execution("e-after", "n1")),
		fsm.Reserve(key("run"), fp, execution("e-x", "n1")),
		fsm.Complete(key("run"), fp, completed("e-run", `"ok"`, t0.Add(time.Hour))),
		fsm.Expire(t0.Add(time.Minute + time.Second)),
	} {
		a, b := x.p.Apply(next, c), p.Apply(next, c)
		if !bytes.Equal(mustJSON(t, a), mustJSON(t, b)) {
			t.Fatalf("%s at %d: %+v vs %+v", c.Type, next, a, b)
		}
		next++
	}
	if !p.Equal(x.p) {
		t.Fatal("processors diverged after the restore")
	}
}

func TestSnapshotOfEmptyProcessor(t *testing.T) {
	b := mustSnapshot(t, fsm.NewProcessor())
	p := mustRestore(t, b)
	if !p.Equal(fsm.NewProcessor()) || p.State().Capacity() != fsm.DefaultCapacity || p.CapacitySet() {
		t.Fatalf("restored empty processor differs: %s", b)
	}
	if got := mustSnapshot(t, p); !bytes.Equal(got, b) {
		t.Fatalf("snapshot bytes differ:\n%s\n%s", got, b)
	}
}

// Equal states give equal bytes, whatever order the members joined in.
func TestSnapshotBytesAreCanonical(t *testing.T) {
	nodes := []fsm.NodeInfo{
		{ID: "n3", RaftAddr: "c"}, {ID: "n1", RaftAddr: "a"}, {ID: "n2", RaftAddr: "b"},
	}
	x, y := newProc(t), newProc(t)
	for i := range nodes {
		x.mustOK(fsm.SetNode(nodes[i]))
		y.mustOK(fsm.SetNode(nodes[len(nodes)-1-i]))
	}
	for _, q := range []*proc{x, y} {
		for _, id := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n"} {
			q.mustReserve(id, "e-"+id, "n1")
		}
	}
	bx, by := x.snapshot(), y.snapshot()
	if !bytes.Equal(bx, by) {
		t.Fatalf("equal states, different snapshots:\n%s\n%s", bx, by)
	}
	for range 20 {
		if again := x.snapshot(); !bytes.Equal(again, bx) {
			t.Fatal("snapshot bytes change between calls")
		}
	}
	// (The order of records and nodes in them: TestSnapshotOrder.)
}

// handSnapshot writes a snapshot by hand, of this build's version, as a
// corrupted or foreign file could have it: unchecked, records and nodes
// in the order given.
func handSnapshot(tb fataler, capacity int, lastSeq uint64, records []store.Record, nodes ...fsm.NodeInfo) []byte {
	tb.Helper()
	return versionSnapshot(tb, fsm.SnapshotVersion, fsm.SnapshotParts{Capacity: capacity, LastSeq: lastSeq, Records: records, Nodes: nodes})
}

func versionSnapshot(tb fataler, version uint64, d fsm.SnapshotParts) []byte {
	tb.Helper()
	b, err := fsm.WriteSnapshot(d, version)
	if err != nil {
		tb.Fatalf("write snapshot: %v", err)
	}
	return b
}

// handRecord is a running record of the identity (p, s, requestID).
func handRecord(id, requestID string, seq uint64) store.Record {
	return store.Record{
		ExecutionID: id, Key: store.Key{Principal: "p", Session: "s", RequestID: requestID}, Tool: "t", Fingerprint: "fp",
		Status: store.StatusRunning, NodeID: "n1", StartedAt: t0, Seq: seq,
	}
}

func records(rs ...store.Record) []store.Record { return rs }

func badSnapshots() map[string][]byte {
	tb := &panicker{}
	r := handRecord
	notJSON := r("e1", "r1", 1)
	notJSON.Status, notJSON.Data, notJSON.FinishedAt = store.StatusCompleted, []byte(`{"a":`), t0
	good := handSnapshot(tb, 10, 2, records(r("e1", "r1", 1)))
	return map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("\x00\x01not a snapshot"),
		"truncated": good[:len(good)-3],
		"the JSON of builds before the binary format": []byte(`{"version":1,"capacity":10,"capacity_set":false,"last_seq":0,"records":[],"nodes":[]}`),
		"version 1":           versionSnapshot(tb, 1, fsm.SnapshotParts{Capacity: 10}),
		"newer version":       versionSnapshot(tb, fsm.SnapshotVersion+1, fsm.SnapshotParts{Capacity: 10}),
		"no version":          {0xC2, 0},
		"zero capacity":       handSnapshot(tb, 0, 0, nil),
		"negative capacity":   handSnapshot(tb, -5, 0, nil),
		"duplicate record":    handSnapshot(tb, 10, 2, records(r("e1", "r1", 1), r("e1", "r1", 1))),
		"duplicate identity":  handSnapshot(tb, 10, 2, records(r("e1", "r1", 1), r("e2", "r1", 2))),
		"duplicate execution": handSnapshot(tb, 10, 2, records(r("e1", "r1", 1), r("e1", "r2", 2))),
		"duplicate seq":       handSnapshot(tb, 10, 2, records(r("e1", "r1", 2), r("e2", "r2", 2))),
		"seq above last_seq":  handSnapshot(tb, 10, 2, records(r("e1", "r1", 3))),
		"seq zero":            handSnapshot(tb, 10, 2, records(r("e1", "r1", 0))),
		"node without id":     handSnapshot(tb, 10, 0, nil, fsm.NodeInfo{RaftAddr: "a"}),
		"data not JSON":       handSnapshot(tb, 10, 2, records(notJSON)),
	}
}

// panicker is a fataler for the fixtures built outside a test.
type panicker struct{}

func (panicker) Helper()                           {}
func (panicker) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// A snapshot of a version this build does not read, newer or older, is
// refused before anything after its version is read, with an error that
// names both versions; the processor is unchanged.
func TestRestoreSnapshotOfAnotherVersion(t *testing.T) {
	// A newer version's header need not read as this one's: here it has
	// a field more, and its records another layout.
	newer := []byte{0xC2, 4, fsm.SnapshotVersion + 1, 20, 1, 7, 0xFF, 0xFF}
	for name, tc := range map[string]struct {
		b    []byte
		v    uint64
		word string
	}{
		"newer":         {newer, fsm.SnapshotVersion + 1, "newer build"},
		"much newer":    {versionSnapshot(t, 1<<40, fsm.SnapshotParts{Capacity: 10}), 1 << 40, "newer build"},
		"older":         {versionSnapshot(t, 1, fsm.SnapshotParts{Capacity: 10}), 1, "older build"},
		"zero":          {versionSnapshot(t, 0, fsm.SnapshotParts{Capacity: 10}), 0, "older build"},
		"newer, intact": {versionSnapshot(t, fsm.SnapshotVersion+1, fsm.SnapshotParts{Capacity: 10}), fsm.SnapshotVersion + 1, "newer build"},
	} {
		t.Run(name, func(t *testing.T) {
			x := seeded(t)
			before := x.snapshot()
			err := x.p.RestoreSnapshot(bytes.NewReader(tc.b))
			var ve *fsm.VersionError
			if !errors.As(err, &ve) || ve.Version != tc.v || ve.Want != fsm.SnapshotVersion || ve.Form != "snapshot" {
				t.Fatalf("RestoreSnapshot = %v, want a VersionError of version %d", err, tc.v)
			}
			for _, want := range []string{"version " + strconv.FormatUint(tc.v, 10), "reads version " + strconv.Itoa(fsm.SnapshotVersion), tc.word} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if !bytes.Equal(x.snapshot(), before) {
				t.Fatal("a refused snapshot changed the state")
			}
		})
	}
}

// Bytes that are not a snapshot at all (the JSON of builds before the
// binary format, anything else) are refused naming their first byte.
func TestRestoreSnapshotOfAnotherForm(t *testing.T) {
	for _, b := range [][]byte{[]byte(`{"version":1,"capacity":10,"records":[],"nodes":[]}`), {0xC1, 1}, {0}} {
		err := fsm.NewProcessor().RestoreSnapshot(bytes.NewReader(b))
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("first byte %#02x", b[0])) {
			t.Errorf("RestoreSnapshot(%q) = %v, want an error naming the first byte", b, err)
		}
	}
}

func TestRestoreSnapshotRefusesAndKeepsTheState(t *testing.T) {
	for name, b := range badSnapshots() {
		t.Run(name, func(t *testing.T) {
			x := seeded(t)
			before := x.snapshot()
			if err := x.p.RestoreSnapshot(bytes.NewReader(b)); err == nil {
				t.Fatalf("RestoreSnapshot accepted %q", b)
			}
			if !bytes.Equal(before, x.snapshot()) {
				t.Fatal("a refused snapshot changed the state")
			}
			if !x.p.Equal(mustRestore(t, before)) {
				t.Fatal("a refused snapshot changed the state")
			}
			// The processor still works.
			x.mustReserve("after", "e-after", "n1")
		})
	}
}

func TestRestoreSnapshotAcceptsHandWritten(t *testing.T) {
	b := handSnapshot(t, 3, 9, records(handRecord("e2", "r2", 9), handRecord("e1", "r1", 4)),
		fsm.NodeInfo{ID: "n2", RaftAddr: "b", HTTPAddr: "hb"}, fsm.NodeInfo{ID: "n1", RaftAddr: "a", HTTPAddr: "ha"})
	p := mustRestore(t, b)
	if p.State().Len() != 2 || p.State().LastSeq() != 9 || p.State().Capacity() != 3 {
		t.Fatalf("restored %d records, last seq %d, capacity %d", p.State().Len(), p.State().LastSeq(), p.State().Capacity())
	}
	if n := p.Nodes(); len(n) != 2 || n[0].ID != "n1" || n[1].ID != "n2" {
		t.Fatalf("nodes %+v", n)
	}
	// The next reservation must come after the snapshot's last seq.
	if r := p.Apply(9, fsm.Reserve(key("r3"), fp, execution("e3", "n1"))); r.Code != store.CodeInvalidRequest {
		t.Fatalf("reserve at the snapshot's last seq: %+v", r)
	}
	if r := p.Apply(10, fsm.Reserve(key("r3"), fp, execution("e3", "n1"))); r.Outcome != store.Reserved {
		t.Fatalf("reserve after the snapshot: %+v", r)
	}
	// Records are stored in seq order whatever the file's order.
	recs := p.State().Records()
	if recs[0].ExecutionID != "e1" || recs[1].ExecutionID != "e2" || recs[2].ExecutionID != "e3" {
		t.Fatalf("records %+v", recs)
	}
}

// A restored processor owns its payloads: bytes the caller reuses after
// RestoreSnapshot do not leak into the state.
func TestRestoreSnapshotCopiesPayloads(t *testing.T) {
	x := seeded(t)
	b := x.snapshot()
	buf := append([]byte(nil), b...)
	p := fsm.NewProcessor()
	if err := p.RestoreSnapshot(bytes.NewReader(buf)); err != nil {
		t.Fatal(err)
	}
	for i := range buf {
		buf[i] = 'x'
	}
	if got := mustSnapshot(t, p); !bytes.Equal(got, b) {
		t.Fatal("restored state shares memory with the snapshot buffer")
	}
}

// TestBinarySnapshotTruncated: a binary snapshot cut short anywhere, or
// with a byte changed, is refused or restores a consistent state, and a
// refusal leaves the processor as it was.
func TestBinarySnapshotTruncated(t *testing.T) {
	x := seeded(t)
	bin := x.snapshot()
	for n := range len(bin) {
		p := fsm.NewProcessor()
		before := mustSnapshot(t, p)
		if err := p.RestoreSnapshot(bytes.NewReader(bin[:n])); err == nil {
			t.Fatalf("a snapshot cut at %d of %d bytes restored", n, len(bin))
		}
		if !bytes.Equal(mustSnapshot(t, p), before) {
			t.Fatalf("a refused snapshot (cut at %d) changed the processor", n)
		}
	}
	if err := fsm.NewProcessor().RestoreSnapshot(bytes.NewReader(append(append([]byte{}, bin...), 0))); err == nil {
		t.Fatal("a snapshot with a byte after its end restored")
	}
	for i := range bin {
		b := append([]byte{}, bin...)
		b[i] ^= 0x5A
		p := fsm.NewProcessor()
		if err := p.RestoreSnapshot(bytes.NewReader(b)); err == nil {
			if again := mustRestore(t, mustSnapshot(t, p)); !again.Equal(p) {
				t.Fatalf("byte %d changed: restored a state that does not restore to itself", i)
			}
		}
	}
}
