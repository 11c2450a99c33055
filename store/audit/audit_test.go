package audit_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store/audit"
	"github.com/carmyhq/carmy/store/jcs"
)

// chain builds an export of n entries (after anchor), and returns it with
// its head.
func chain(t testing.TB, anchor audit.Head, n int) ([]byte, audit.Head) {
	t.Helper()
	var out []byte
	if anchor != audit.Start {
		out = audit.CheckpointLine(out, anchor)
	}
	h := anchor
	base := time.Date(2026, 12, 6, 2, 0, 0, 123456789, time.UTC)
	for i := range n {
		var e audit.Entry
		e, h = h.Next(audit.Draft{
			Time: base.Add(time.Duration(i) * time.Second), Kind: audit.KindReserved,
			ExecutionID: fmt.Sprintf("exec_%03d", i), Principal: "ålice\"<&>\x01", Actor: "ålice",
			Tool: "echo", Fingerprint: "ab12", Status: "running",
		}, nil)
		out = e.Line(out)
	}
	return out, h
}

// TestCanonicalIsJCS: the bytes an entry's hash covers are RFC 8785's
// canonical JSON of the entry's members but "hash", and its line the
// canonical JSON of all of them.
func TestCanonicalIsJCS(t *testing.T) {
	e, _ := audit.Start.Next(audit.Draft{
		Time: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.FixedZone("", 3600)), Kind: audit.KindResolved,
		ExecutionID: "exec_1", Principal: "a\u2028b\"\\\x7f<>", Actor: "probe", Tool: "t", Fingerprint: "f",
		Status: "completed", Target: "\xff",
	}, nil)
	all, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want, err := jcs.Canonical(all)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Line(nil); !bytes.Equal(got, append(want, '\n')) {
		t.Fatalf("line\n%s\nwant\n%s", got, want)
	}
	var m map[string]any
	if err := json.Unmarshal(all, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "hash")
	noHash, _ := json.Marshal(m)
	want, err = jcs.Canonical(noHash)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Canonical(nil); !bytes.Equal(got, want) {
		t.Fatalf("canonical\n%s\nwant\n%s", got, want)
	}
	// The hash as docs/audit.md defines it, computed here on its own.
	sum := sha256.Sum256(append([]byte(e.PrevHash), want...))
	if e.PrevHash != audit.Genesis || e.Hash != hex.EncodeToString(sum[:]) {
		t.Fatalf("entry 1: prev_hash %s hash %s, want %s and %x", e.PrevHash, e.Hash, audit.Genesis, sum)
	}
}

func TestVerifyGood(t *testing.T) {
	for _, anchor := range []audit.Head{audit.Start, {Seq: 41, Hash: audit.Genesis[:63] + "1"}} {
		file, head := chain(t, anchor, 20)
		v, err := audit.Verify(bytes.NewReader(file))
		if err != nil {
			t.Fatal(err)
		}
		if v.Head != head || v.Anchor != anchor || v.Entries != 20 || head.Seq != anchor.Seq+20 {
			t.Fatalf("verified %+v, want head %+v from %+v", v, head, anchor)
		}
	}
	if v, err := audit.Verify(bytes.NewReader(nil)); err != nil || v.Head != audit.Start {
		t.Fatalf("empty: %+v %v", v, err)
	}
}

// TestVerifyFlipAnyByte: changing any byte of any line of an export is
// caught, and named by the seq of the first line that no longer verifies
// (the changed one, or the entry after a changed checkpoint).
func TestVerifyFlipAnyByte(t *testing.T) {
	anchor := audit.Head{Seq: 7, Hash: "aa" + audit.Genesis[2:]}
	file, _ := chain(t, anchor, 4)
	lines := bytes.SplitAfter(file, []byte("\n"))
	for i := range file {
		// The line holding byte i, and the seq that line stands for.
		line, off := 0, 0
		for off+len(lines[line]) <= i {
			off += len(lines[line])
			line++
		}
		want := anchor.Seq + uint64(line) // the checkpoint's line is 0: its next entry
		if line == 0 {
			want = anchor.Seq + 1
		}
		for _, flip := range []byte{0x01, 0x20, 0x80} {
			bad := bytes.Clone(file)
			bad[i] ^= flip
			_, err := audit.Verify(bytes.NewReader(bad))
			var be *audit.BadError
			if !errors.As(err, &be) {
				t.Fatalf("byte %d ^ %#x: err %v, want a BadError", i, flip, err)
			}
			switch {
			case line == 0 && (be.Line == 1 || be.Line == 2):
				// A changed checkpoint: refused, or its next entry no
				// longer follows it.
			case be.Line != line+1 || be.Seq != want:
				t.Fatalf("byte %d ^ %#x (line %d): named line %d seq %d, want seq %d (%v)", i, flip, line+1, be.Line, be.Seq, want, err)
			}
		}
	}
}

func TestVerifyNamesMissingAndReordered(t *testing.T) {
	file, _ := chain(t, audit.Start, 5)
	lines := bytes.SplitAfter(file, []byte("\n"))
	dropped := bytes.Join([][]byte{lines[0], lines[1], lines[3], lines[4]}, nil)
	_, err := audit.Verify(bytes.NewReader(dropped))
	var be *audit.BadError
	if !errors.As(err, &be) || be.Seq != 3 {
		t.Fatalf("a missing entry: %v, want seq 3 named", err)
	}
	// The end cut: what remains verifies, with the head earlier (a
	// --head check catches it).
	v, err := audit.Verify(bytes.NewReader(bytes.Join(lines[:3], nil)))
	if err != nil || v.Head.Seq != 3 {
		t.Fatalf("a cut export: %+v %v", v, err)
	}
}
