package fsm_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/carmyhq/carmy/fsm"
)

func TestBatchRoundTrip(t *testing.T) {
	cmds := [][]byte{
		mustEncode(t, fsm.Reserve(key("r1"), fp, execution("e1", "n1"))),
		mustEncode(t, fsm.Complete(key("r1"), fp, completed("e1", `{"ok":true}`, t0))),
		mustEncode(t, fsm.Interrupt("n2")),
	}
	b, err := fsm.EncodeBatch(cmds)
	if err != nil {
		t.Fatal(err)
	}
	if !fsm.IsBatch(b) || fsm.IsBatch(cmds[0]) {
		t.Fatal("IsBatch does not tell a batch from a single command")
	}
	if len(b) != fsm.BatchSize(cmds) {
		t.Fatalf("BatchSize = %d, encoded %d bytes", fsm.BatchSize(cmds), len(b))
	}
	got, err := fsm.DecodeBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(cmds) {
		t.Fatalf("decoded %d commands, want %d", len(got), len(cmds))
	}
	for i := range cmds {
		if !bytes.Equal(got[i], cmds[i]) {
			t.Fatalf("command %d: %q, want %q", i, got[i], cmds[i])
		}
	}
}

func TestBatchRefusesMalformed(t *testing.T) {
	one := mustEncode(t, fsm.Interrupt("n1"))
	good, err := fsm.EncodeBatch([][]byte{one, one})
	if err != nil {
		t.Fatal(err)
	}
	tooMany := binary.AppendUvarint([]byte{0xB1}, fsm.MaxBatchCommands+1)
	tooMany = append(tooMany, bytes.Repeat([]byte{0}, fsm.MaxBatchCommands+1)...)
	cases := map[string][]byte{
		"empty":             nil,
		"a single command":  one,
		"no count":          {0xB1},
		"count zero":        {0xB1, 0},
		"count over bound":  tooMany,
		"count over bytes":  {0xB1, 100, 0},
		"length past end":   append(binary.AppendUvarint([]byte{0xB1, 1}, 50), "short"...),
		"truncated":         good[:len(good)-1],
		"trailing bytes":    append(append([]byte{}, good...), 0),
		"overlong varint":   {0xB1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01},
		"huge length":       {0xB1, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F},
		"command count 2/1": append(binary.AppendUvarint([]byte{0xB1, 2}, uint64(len(one))), one...),
	}
	for name, b := range cases {
		if cmds, err := fsm.DecodeBatch(b); !errors.Is(err, fsm.ErrMalformedBatch) || cmds != nil {
			t.Errorf("%s: DecodeBatch = %d commands, %v; want ErrMalformedBatch and nothing", name, len(cmds), err)
		}
	}
	if _, err := fsm.EncodeBatch(nil); !errors.Is(err, fsm.ErrMalformedBatch) {
		t.Errorf("EncodeBatch of nothing: %v", err)
	}
	if _, err := fsm.EncodeBatch(make([][]byte, fsm.MaxBatchCommands+1)); !errors.Is(err, fsm.ErrMalformedBatch) {
		t.Errorf("EncodeBatch over the bound: %v", err)
	}
}

// TestTokenOrder: tokens grow strictly with the position in an entry and
// from one entry to the next, and stay below 2^53 up to MaxTokenIndex.
func TestTokenOrder(t *testing.T) {
	prev := uint64(0)
	for _, index := range []uint64{1, 2, 3, 1000, fsm.MaxTokenIndex} {
		for _, pos := range []int{0, 1, fsm.MaxBatchCommands - 1} {
			tok := fsm.Token(index, pos)
			if tok <= prev {
				t.Fatalf("Token(%d, %d) = %d, not above %d", index, pos, tok, prev)
			}
			prev = tok
		}
	}
	if last := fsm.Token(fsm.MaxTokenIndex, fsm.MaxBatchCommands-1); last >= 1<<53 {
		t.Fatalf("the last token %d is not below 2^53", last)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	for _, seed := range commandSeeds(f) {
		b, err := fsm.EncodeBatch([][]byte{seed, seed})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(seed)
	}
	f.Add([]byte{0xB1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		cmds, err := fsm.DecodeBatch(b)
		if err != nil {
			if !errors.Is(err, fsm.ErrMalformedBatch) || cmds != nil {
				t.Fatalf("DecodeBatch failed with %v and %d commands", err, len(cmds))
			}
			return
		}
		if len(cmds) == 0 || len(cmds) > fsm.MaxBatchCommands {
			t.Fatalf("decoded %d commands", len(cmds))
		}
		again, err := fsm.EncodeBatch(cmds)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := fsm.DecodeBatch(again)
		if err != nil || len(back) != len(cmds) {
			t.Fatalf("re-decode: %d commands, %v", len(back), err)
		}
		for i := range cmds {
			if !bytes.Equal(back[i], cmds[i]) {
				t.Fatalf("command %d changed through a re-encode", i)
			}
		}
		// Applying whatever decoded never panics, and answers each
		// command.
		m := fsm.New()
		got := m.Apply(batchLog(1, b))
		if rs, ok := got.(fsm.Responses); !ok || len(rs) != len(cmds) {
			t.Fatalf("apply answered %T for %d commands", got, len(cmds))
		}
	})
}
