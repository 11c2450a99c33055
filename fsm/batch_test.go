package fsm_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

func batchLog(index uint64, data []byte) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

// applied is what one way of putting commands into the log gave: each
// command's Response and fencing token, in command order, and the state.
type applied struct {
	resps  []fsm.Response
	tokens []uint64
	fsm    *fsm.FSM
}

// applyAs puts cmds into a fresh FSM's log as batch entries cut where
// split says (bit i set: a new entry starts after command i), or one
// command per entry when singles is set. Each entry goes to ApplyBatch
// alone or with the next, as together says.
func applyAs(t *rapid.T, cmds [][]byte, split uint64, singles bool, together uint64) applied {
	var entries [][][]byte
	cur := [][]byte{}
	for i, c := range cmds {
		cur = append(cur, c)
		if singles || i == len(cmds)-1 || split&(1<<i) != 0 {
			entries = append(entries, cur)
			cur = [][]byte{}
		}
	}
	out := applied{fsm: fsm.New()}
	var logs []*raft.Log
	index := uint64(0)
	for e, cs := range entries {
		index += 1 + uint64(e%2) // gaps, where other entries sit
		b, err := fsm.EncodeBatch(cs)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, batchLog(index, b))
		for pos := range cs {
			out.tokens = append(out.tokens, fsm.Token(index, pos))
		}
		if e == len(entries)-1 || together&(1<<e) == 0 {
			for _, r := range out.fsm.ApplyBatch(logs) {
				rs, ok := r.(fsm.Responses)
				if !ok {
					t.Fatalf("apply answered %T", r)
				}
				out.resps = append(out.resps, rs...)
			}
			logs = nil
		}
	}
	if len(out.resps) != len(cmds) {
		t.Fatalf("%d responses for %d commands", len(out.resps), len(cmds))
	}
	return out
}

// normalized returns the JSON of a's responses and state with every
// fencing token replaced by the number of the command that got it, so
// that ways of batching the same commands compare equal.
func (a applied) normalized(t *rapid.T) (resps, state []byte) {
	ord := make(map[uint64]uint64, len(a.tokens))
	for i, tok := range a.tokens {
		ord[tok] = uint64(i + 1)
	}
	seq := func(s uint64) uint64 {
		if s == 0 {
			return 0
		}
		o, ok := ord[s]
		if !ok {
			t.Fatalf("seq %d is no command's token", s)
		}
		return o
	}
	rs := make([]fsm.Response, len(a.resps))
	for i, r := range a.resps {
		r.Record.Seq = seq(r.Record.Seq)
		rs[i] = r
	}
	bin, err := a.fsm.SnapshotBytes()
	if err != nil {
		t.Fatal(err)
	}
	p := fsm.NewProcessor()
	if err := p.RestoreSnapshot(bytes.NewReader(bin)); err != nil {
		t.Fatal(err)
	}
	st := p.State()
	recs := st.Records()
	for i := range recs {
		recs[i].Seq = seq(recs[i].Seq)
	}
	d := map[string]any{
		"capacity": st.Capacity(), "capacity_set": p.CapacitySet(), "max_bytes": st.MaxBytes(),
		"last_seq": seq(st.LastSeq()), "records": recs, "nodes": p.Nodes(),
	}
	return mustJSON(t, rs), mustJSON(t, d)
}

// TestPropertyBatchesApplyAsSingles: random command sequences, put into
// the log one command per entry and as batch entries of every split,
// give the same responses and the same state, fencing tokens aside, and
// exactly what applying each command alone with its token gives. The
// tokens grow strictly in command order however the commands are cut.
func TestPropertyBatchesApplyAsSingles(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		// Draw commands against a reference that applies them, so
		// that later ones find the records earlier ones made.
		ref := fsm.NewProcessor()
		n := rapid.IntRange(1, 8).Draw(t, "commands")
		cmds := make([][]byte, n)
		for i := range cmds {
			c := drawCommand(t, ref)
			ref.Apply(uint64(i+1), c)
			cmds[i] = mustEncode(t, c)
		}
		together := rapid.Uint64().Draw(t, "together")
		want := applyAs(t, cmds, 0, true, together)
		wantResps, wantState := want.normalized(t)
		for split := uint64(0); split < 1<<(n-1); split++ {
			got := applyAs(t, cmds, split, false, together)
			for i := 1; i < len(got.tokens); i++ {
				if got.tokens[i] <= got.tokens[i-1] {
					t.Fatalf("split %b: token %d then %d", split, got.tokens[i-1], got.tokens[i])
				}
			}
			resps, state := got.normalized(t)
			if !bytes.Equal(resps, wantResps) {
				t.Fatalf("split %b: responses differ from single entries:\n%s\n%s", split, resps, wantResps)
			}
			if !bytes.Equal(state, wantState) {
				t.Fatalf("split %b: state differs from single entries:\n%s\n%s", split, state, wantState)
			}
			// And exactly what each command alone, with its token,
			// gives a processor.
			p := fsm.NewProcessor()
			for i, data := range cmds {
				c, err := fsm.Decode(data)
				var r fsm.Response
				if err != nil {
					t.Fatalf("command %d: %v", i, err)
				}
				r = p.Apply(got.tokens[i], c)
				if a, b := mustJSON(t, r), mustJSON(t, got.resps[i]); !bytes.Equal(a, b) {
					t.Fatalf("split %b, command %d: batched %s, alone %s", split, i, b, a)
				}
			}
			sum := sha256.Sum256(mustSnapshot(t, p))
			if h, err := got.fsm.Hash(); err != nil || h != hex.EncodeToString(sum[:]) {
				t.Fatalf("split %b: state differs from the commands applied alone (%v)", split, err)
			}
		}
	})
}

// TestBatchUnreadableCommand: a command of a batch that cannot be decoded
// is refused alone; the others apply.
func TestBatchUnreadableCommand(t *testing.T) {
	f := fsm.New()
	b, err := fsm.EncodeBatch([][]byte{
		mustEncode(t, fsm.Reserve(key("r1"), fp, execution("e1", "n1"))),
		[]byte(`{"v":99,"type":"reserve"}`),
		mustEncode(t, fsm.Reserve(key("r2"), fp, execution("e2", "n1"))),
	})
	if err != nil {
		t.Fatal(err)
	}
	rs, ok := f.Apply(batchLog(7, b)).(fsm.Responses)
	if !ok || len(rs) != 3 {
		t.Fatalf("apply answered %#v", rs)
	}
	if rs[0].Code != "" || rs[2].Code != "" || rs[1].Code != store.CodeInvalidRequest {
		t.Fatalf("codes %q %q %q, want ok, INVALID_REQUEST, ok", rs[0].Code, rs[1].Code, rs[2].Code)
	}
	if rs[0].Record.Seq != fsm.Token(7, 0) || rs[2].Record.Seq != fsm.Token(7, 2) {
		t.Fatalf("seqs %d and %d, want %d and %d", rs[0].Record.Seq, rs[2].Record.Seq, fsm.Token(7, 0), fsm.Token(7, 2))
	}
	if f.AppliedIndex() != 7 {
		t.Fatalf("applied index %d, want 7", f.AppliedIndex())
	}
	// An unreadable batch is refused whole, with one Response.
	if r, ok := f.Apply(batchLog(8, []byte{0xB1, 0})).(fsm.Response); !ok || r.Code != store.CodeInvalidRequest {
		t.Fatalf("a malformed batch answered %#v", r)
	}
}

// TestEntryOfAnotherFormIsRefused: an entry that is not a batch this
// build reads (a lone command, the JSON command of builds before the
// binary codec, a batch of another version, nothing) is answered with one
// INVALID_REQUEST Response that names its first byte, changes nothing,
// still moves the applied index, and does not stop the entries after it.
func TestEntryOfAnotherFormIsRefused(t *testing.T) {
	f := fsm.New()
	before := mustHash(t, f)
	lone := mustEncode(t, fsm.Reserve(key("r1"), fp, execution("e1", "n1")))
	newer := append([]byte{0xB2}, mustBatch(t, lone)[1:]...)
	for i, data := range [][]byte{
		lone,
		[]byte(`{"v":1,"type":"reserve","key":{"principal":"alice","session_id":"s1","request_id":"r1"},"fingerprint":"fp-a",` +
			`"execution":{"execution_id":"e1","tool":"t","node_id":"n1","started_at":"2026-11-30T10:00:00Z"}}`),
		newer,
		nil,
	} {
		index := uint64(i + 1)
		r, ok := f.Apply(batchLog(index, data)).(fsm.Response)
		if !ok || r.Code != store.CodeInvalidRequest || !errors.Is(r.Err(), store.ErrInvalid) {
			t.Fatalf("entry %q: answered %#v, want one INVALID_REQUEST", data, r)
		}
		if len(data) > 0 && !strings.Contains(r.Message, fmt.Sprintf("first byte %#02x", data[0])) {
			t.Errorf("entry %q: message %q does not name its first byte", data, r.Message)
		}
		if got := mustHash(t, f); got != before {
			t.Fatalf("entry %q changed the state", data)
		}
		if f.AppliedIndex() != index {
			t.Fatalf("applied index %d, want %d", f.AppliedIndex(), index)
		}
	}
	rs, ok := f.Apply(batchLog(9, mustBatch(t, lone))).(fsm.Responses)
	if !ok || len(rs) != 1 || rs[0].Outcome != store.Reserved || rs[0].Record.Seq != fsm.Token(9, 0) {
		t.Fatalf("the batch after them: %#v", rs)
	}
}

// TestBatchRefusesCommandsOfAnotherForm: a command of a batch that is not
// in the binary form of this build (the JSON of builds before it, a newer
// tag) is refused alone, naming its first byte, on every replica alike.
func TestBatchRefusesCommandsOfAnotherForm(t *testing.T) {
	good := mustEncode(t, fsm.Interrupt("n1"))
	newer := append([]byte{0xC4}, good[1:]...)
	b := mustBatch(t, []byte(`{"v":1,"type":"interrupt","node_id":"n1"}`), newer, good)
	a, c := fsm.New(), fsm.New()
	ra, rc := a.Apply(batchLog(1, b)), c.Apply(batchLog(1, b))
	if !bytes.Equal(mustJSON(t, ra), mustJSON(t, rc)) || mustHash(t, a) != mustHash(t, c) {
		t.Fatalf("two replicas answered %s and %s", mustJSON(t, ra), mustJSON(t, rc))
	}
	rs, ok := ra.(fsm.Responses)
	if !ok || len(rs) != 3 || rs[2].Code != "" {
		t.Fatalf("answered %#v", ra)
	}
	for i, first := range []byte{'{', 0xC4} {
		if rs[i].Code != store.CodeInvalidRequest || !strings.Contains(rs[i].Message, fmt.Sprintf("first byte %#02x", first)) {
			t.Errorf("command %d: %+v, want INVALID_REQUEST naming the byte %#02x", i, rs[i], first)
		}
	}
}

func mustBatch(tb fataler, cmds ...[]byte) []byte {
	tb.Helper()
	b, err := fsm.EncodeBatch(cmds)
	if err != nil {
		tb.Fatalf("batch: %v", err)
	}
	return b
}
