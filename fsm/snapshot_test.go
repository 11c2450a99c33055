package fsm_test

import (
	"bytes"
	"encoding/json"
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
	var d struct {
		Records []store.Record `json:"records"`
	}
	bj, err := mustRestore(t, bx).MarshalSnapshotJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(bj, &d); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(d.Records); i++ {
		if d.Records[i-1].Seq >= d.Records[i].Seq {
			t.Fatalf("records not ordered by seq: %d then %d", d.Records[i-1].Seq, d.Records[i].Seq)
		}
	}
}

// snapshotJSON renders a snapshot by hand, as a corrupted or foreign file
// would have it.
func snapshotJSON(version, capacity int, lastSeq uint64, records, nodes string) []byte {
	return []byte(`{"version":` + itoa(version) + `,"capacity":` + itoa(capacity) +
		`,"last_seq":` + itoa(int(lastSeq)) + `,"records":` + records + `,"nodes":` + nodes + `}`)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func recordJSON(id, requestID string, seq uint64) string {
	return `{"execution_id":"` + id + `","key":{"principal":"p","session_id":"s","request_id":"` + requestID +
		`"},"tool":"t","fingerprint":"fp","status":"running","node_id":"n1","started_at":"2026-11-30T10:00:00Z","seq":` +
		itoa(int(seq)) + `}`
}

func badSnapshots() map[string][]byte {
	return map[string][]byte{
		"empty":               nil,
		"garbage":             []byte("\x00\x01not a snapshot"),
		"truncated":           snapshotJSON(1, 10, 2, `[`+recordJSON("e1", "r1", 1), `[]`)[:60],
		"json array":          []byte(`[1,2,3]`),
		"wrong version":       snapshotJSON(2, 10, 0, `[]`, `[]`),
		"no version":          []byte(`{"capacity":10,"last_seq":0,"records":[],"nodes":[]}`),
		"zero capacity":       snapshotJSON(1, 0, 0, `[]`, `[]`),
		"negative capacity":   snapshotJSON(1, -5, 0, `[]`, `[]`),
		"duplicate record":    snapshotJSON(1, 10, 2, `[`+recordJSON("e1", "r1", 1)+`,`+recordJSON("e1", "r1", 1)+`]`, `[]`),
		"duplicate identity":  snapshotJSON(1, 10, 2, `[`+recordJSON("e1", "r1", 1)+`,`+recordJSON("e2", "r1", 2)+`]`, `[]`),
		"duplicate execution": snapshotJSON(1, 10, 2, `[`+recordJSON("e1", "r1", 1)+`,`+recordJSON("e1", "r2", 2)+`]`, `[]`),
		"duplicate seq":       snapshotJSON(1, 10, 2, `[`+recordJSON("e1", "r1", 2)+`,`+recordJSON("e2", "r2", 2)+`]`, `[]`),
		"seq above last_seq":  snapshotJSON(1, 10, 2, `[`+recordJSON("e1", "r1", 3)+`]`, `[]`),
		"seq zero":            snapshotJSON(1, 10, 2, `[`+recordJSON("e1", "r1", 0)+`]`, `[]`),
		"node without id":     snapshotJSON(1, 10, 0, `[]`, `[{"id":"","raft_addr":"a"}]`),
		"records not a list":  snapshotJSON(1, 10, 0, `{}`, `[]`),
		"bad time":            snapshotJSON(1, 10, 1, `[`+strings.Replace(recordJSON("e1", "r1", 1), "2026-11-30T10:00:00Z", "noon", 1)+`]`, `[]`),
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
	b := snapshotJSON(1, 3, 9, `[`+recordJSON("e2", "r2", 9)+`,`+recordJSON("e1", "r1", 4)+`]`,
		`[{"id":"n2","raft_addr":"b","http_addr":"hb"},{"id":"n1","raft_addr":"a","http_addr":"ha"}]`)
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

// TestSnapshotFormats: the JSON snapshot of earlier builds and the binary
// one of this build restore to the same state, and a restored state
// writes the same binary bytes.
func TestSnapshotFormats(t *testing.T) {
	x := seeded(t)
	x.mustReserve("res", "e-res", "n2")
	x.mustOK(fsm.Interrupt("n2"))
	// (Data as a log holds it: the JSON format escapes <, > and &, and
	// a state applied from commands holds them escaped already.)
	x.mustOK(fsm.Resolve("e-res", store.Resolution{Result: completed("e-res", `{"a":"\u003c"}`, t0.Add(time.Hour))}))
	bin := x.snapshot()
	if bin[0] != 0xC2 {
		t.Fatalf("this build's snapshot begins with %#x", bin[0])
	}
	js, err := x.p.MarshalSnapshotJSON()
	if err != nil {
		t.Fatal(err)
	}
	fromBin, fromJSON := mustRestore(t, bin), mustRestore(t, js)
	if !fromBin.Equal(x.p) || !fromJSON.Equal(x.p) || !fromJSON.Equal(fromBin) {
		t.Fatal("the two formats restore to different states")
	}
	if !bytes.Equal(mustSnapshot(t, fromJSON), bin) {
		t.Fatal("a state restored from JSON writes other binary bytes")
	}
	if len(bin) >= len(js) {
		t.Errorf("the binary snapshot (%d bytes) is not smaller than the JSON one (%d)", len(bin), len(js))
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
