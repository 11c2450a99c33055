package fsm_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// commandSeeds are encoded commands of every type, some of them about the
// records seeded() holds, and a few near misses.
func commandSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	for _, c := range everyCommand() {
		out = append(out, mustEncode(tb, c))
	}
	for _, c := range []fsm.Command{
		fsm.Reserve(key("new"), fp, execution("e-new", "n1")),
		fsm.Reserve(key("done"), fp, execution("e-new", "n1")),
		fsm.Reserve(key("run"), "fp-b", execution("e-new", "n1")),
		fsm.Complete(key("run"), fp, completed("e-run", `{"a":[1,2]}`, t0.Add(time.Hour))),
		fsm.Complete(key("int"), fp, failedWith("e-int", store.StatusTimedOut, "TIMEOUT", t0.Add(time.Hour))),
		fsm.Cancel("e-run", cancelled("e-run", t0.Add(time.Hour))),
		fsm.Resolve("e-int", store.Resolution{Result: completed("e-int", `null`, t0.Add(time.Hour))}),
		fsm.Resolve("e-run", store.Resolution{Result: failedWith("e-run", store.StatusFailed, "X", t0), AllowRunning: true}),
		fsm.Release("e-int", false),
		fsm.Release("e-run", true),
		fsm.Interrupt("n1"),
		fsm.Expire(t0.Add(time.Hour)),
		fsm.SetLimits(1, 0),
		fsm.SetNode(fsm.NodeInfo{ID: "n1", RaftAddr: "x"}),
		fsm.RemoveNode("n2"),
	} {
		out = append(out, mustEncode(tb, c))
	}
	return append(out,
		nil,
		[]byte(`{"v":1,"type":"interrupt","node_id":"n1"}`), // the JSON of builds before the binary codec
		[]byte{0xC3},
		[]byte{0xC3, 6},
		[]byte{0xC3, 6, 0},
		[]byte{0xC3, 9, 1, 0, 0, 0, 1, 'n', 0, 0, 0},
	)
}

// FuzzDecode: Decode never panics, refuses with ErrMalformed, and what it
// accepts encodes to bytes that decode to the same command.
func FuzzDecode(f *testing.F) {
	for _, b := range commandSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := fsm.Decode(b)
		if err != nil {
			if !errors.Is(err, fsm.ErrMalformed) {
				t.Fatalf("Decode error %v is not ErrMalformed", err)
			}
			return
		}
		e, err := fsm.Encode(c)
		if err != nil {
			// Only a payload that is not JSON is let through by the
			// decoder: the store refuses the command when it applies it.
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("Encode of a decoded command: %v", err)
			}
			x := seeded(t)
			before := x.snapshot()
			if r := x.p.Apply(x.index+1, c); r.Code == "" {
				t.Fatalf("a %s whose payload cannot be encoded (%v) was applied: %+v", c.Type, err, r)
			}
			if !bytes.Equal(x.snapshot(), before) {
				t.Fatalf("a refused %s changed the state", c.Type)
			}
			return
		}
		c2, err := fsm.Decode(e)
		if err != nil {
			t.Fatalf("Decode of an encoded command %s: %v", e, err)
		}
		if !sameCommand(t, c, c2) {
			t.Fatalf("round trip changed the command:\n%+v\n%+v", c, c2)
		}
		if e2 := mustEncode(t, c2); !bytes.Equal(e, e2) {
			t.Fatalf("encoding is not a fixed point:\n%s\n%s", e, e2)
		}
	})
}

// FuzzRestoreSnapshot: arbitrary bytes never panic RestoreSnapshot; a
// refused snapshot leaves the processor as it was; an accepted one is a
// state whose snapshot restores to the same bytes.
func FuzzRestoreSnapshot(f *testing.F) {
	f.Add(mustSnapshot(f, seeded(f).p))
	f.Add(mustSnapshot(f, fsm.NewProcessor()))
	for _, b := range badSnapshots() {
		f.Add(b)
	}
	f.Add(handSnapshot(f, 3, 9, records(handRecord("e2", "r2", 9), handRecord("e1", "r1", 4)),
		fsm.NodeInfo{ID: "n2", RaftAddr: "b"}, fsm.NodeInfo{ID: "n1"}, fsm.NodeInfo{ID: "n1", HTTPAddr: "again"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		x := seeded(t)
		before := x.snapshot()
		if err := x.p.RestoreSnapshot(bytes.NewReader(b)); err != nil {
			if got := x.snapshot(); !bytes.Equal(got, before) {
				t.Fatalf("a refused snapshot (%v) changed the state", err)
			}
			if !x.p.Equal(seeded(t).p) {
				t.Fatalf("a refused snapshot (%v) changed the state", err)
			}
			return
		}
		checkRestored(t, x.p)
	})
}

// checkRestored checks a processor restored from a snapshot: its state
// keeps the table's invariants and its snapshot is a fixed point.
func checkRestored(t *testing.T, p *fsm.Processor) {
	t.Helper()
	st := p.State()
	if st.Capacity() <= 0 {
		t.Fatalf("restored capacity %d", st.Capacity())
	}
	recs := st.Records()
	for i, r := range recs {
		if r.Seq > st.LastSeq() || (i > 0 && recs[i-1].Seq >= r.Seq) {
			t.Fatalf("restored seqs: record %d has seq %d (last seq %d)", i, r.Seq, st.LastSeq())
		}
	}
	s1 := mustSnapshot(t, p)
	q := mustRestore(t, s1)
	if s2 := mustSnapshot(t, q); !bytes.Equal(s1, s2) {
		t.Fatalf("snapshot is not a fixed point:\n%s\n%s", s1, s2)
	}
	if r := mustRestore(t, s1); !r.Equal(q) {
		t.Fatal("two restores of one snapshot differ")
	}
}

// FuzzApply: any command that decodes applies to a populated processor
// without panicking, the same way on two replicas, and leaves a state
// that snapshots and restores.
func FuzzApply(f *testing.F) {
	for _, b := range commandSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := fsm.Decode(b)
		if err != nil {
			return
		}
		x, y := seeded(t), seeded(t)
		before := x.snapshot()
		index := x.index + 1
		r := x.p.Apply(index, c)
		// A second replica reads the entry from the log itself.
		c2, err := fsm.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if r2 := y.p.Apply(index, c2); !bytes.Equal(mustJSON(t, r), mustJSON(t, r2)) {
			t.Fatalf("replicas answered differently:\n%+v\n%+v", r, r2)
		}
		if !x.p.Equal(y.p) {
			t.Fatal("replicas diverged")
		}
		if (r.Code == "") != (r.Err() == nil) {
			t.Fatalf("response %+v with Err() %v", r, r.Err())
		}
		if r.Code != "" && !bytes.Equal(before, x.snapshot()) {
			t.Fatalf("a refused %s (%s) changed the state", c.Type, r.Code)
		}
		// Between nodes a Response travels in its binary form, which keeps
		// it exactly (its JSON does not: strings that are not UTF-8, zone
		// offsets of seconds).
		if got := overBinary(t, r); !bytes.Equal(mustJSON(t, got), mustJSON(t, r)) {
			t.Fatalf("response changed through its binary form:\n%s\n%s", mustJSON(t, r), mustJSON(t, got))
		}
		checkRestored(t, x.p)
	})
}

// FuzzDecodeResponse: DecodeResponse never panics, and what it accepts
// encodes back to the same bytes and decodes to the same response.
func FuzzDecodeResponse(f *testing.F) {
	x := seeded(f)
	for _, c := range everyCommand() {
		b, err := fsm.AppendResponse(nil, x.apply(c))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := fsm.DecodeResponse(b)
		if err != nil {
			return
		}
		again, err := fsm.AppendResponse(nil, r)
		if err != nil {
			t.Fatalf("decoded %x to %+v, which does not encode: %v", b, r, err)
		}
		r2, err := fsm.DecodeResponse(again)
		if err != nil {
			t.Fatalf("re-encoded %x does not decode: %v", again, err)
		}
		if a, b := mustJSON(t, r), mustJSON(t, r2); !bytes.Equal(a, b) {
			t.Fatalf("response changed through its binary form:\n%s\n%s", a, b)
		}
	})
}
