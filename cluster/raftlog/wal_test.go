package raftlog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// openTestWAL opens the WAL in dir with segments of segSize bytes, closed
// at the test's end.
func openTestWAL(t *testing.T, dir string, segSize int64) *WAL {
	t.Helper()
	w, err := OpenWAL(dir)
	if err != nil {
		t.Fatal(err)
	}
	w.segmentSize = segSize
	t.Cleanup(func() { w.Close() })
	return w
}

// writeSegments writes entries 1–60 of term 1, three an append, to a
// WAL in dir with segments of 1 KiB, closes it and returns its segment
// files in order (several).
func writeSegments(t *testing.T, dir string) []string {
	t.Helper()
	w := openTestWAL(t, dir, 1024)
	for i := uint64(1); i <= 60; i += 3 {
		if err := w.StoreLogs(walEntries(i, 3, 1)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) < 2 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	return segs
}

func walEntries(first, n uint64, term uint64) []*raft.Log {
	out := make([]*raft.Log, n)
	for i := range out {
		idx := first + uint64(i)
		out[i] = &raft.Log{Index: idx, Term: term, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(idx)}, int(idx%97)),
			Extensions: []byte{byte(term)}, AppendedAt: time.Unix(0, int64(idx)*1e6)}
	}
	return out
}

// checkWAL fails unless w holds exactly first–last, each entry as
// walEntries made it with term termOf(index).
func checkWAL(t *testing.T, w *WAL, first, last uint64, termOf func(uint64) uint64) {
	t.Helper()
	if f, _ := w.FirstIndex(); f != first {
		t.Fatalf("FirstIndex %d, want %d", f, first)
	}
	if l, _ := w.LastIndex(); l != last {
		t.Fatalf("LastIndex %d, want %d", l, last)
	}
	if first == 0 {
		return
	}
	for _, out := range []uint64{first - 1, last + 1} {
		var l raft.Log
		if out > 0 {
			if err := w.GetLog(out, &l); !errors.Is(err, raft.ErrLogNotFound) {
				t.Fatalf("GetLog(%d) outside %d–%d: %v, want ErrLogNotFound", out, first, last, err)
			}
		}
	}
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		want := walEntries(i, 1, termOf(i))[0]
		if l.Index != i || l.Term != want.Term || l.Type != want.Type || !bytes.Equal(l.Data, want.Data) ||
			!bytes.Equal(l.Extensions, want.Extensions) || !l.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", i, l, *want)
		}
	}
}

func term(t uint64) func(uint64) uint64 { return func(uint64) uint64 { return t } }

// Appends, reads, deletions at the front and at the back, and the whole
// log, across several segments; each state survives a reopen.
func TestWALAppendGetDeleteRange(t *testing.T) {
	dir := t.TempDir()
	w := openTestWAL(t, dir, 2048)
	checkWAL(t, w, 0, 0, term(1))
	for i := uint64(1); i <= 200; i += 10 {
		if err := w.StoreLogs(walEntries(i, 10, 1)); err != nil {
			t.Fatal(err)
		}
	}
	checkWAL(t, w, 1, 200, term(1))
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) < 3 {
		t.Fatalf("%d segments for 200 entries of segments of 2 KiB, want several", len(segs))
	}
	if err := w.StoreLog(walEntries(150, 1, 1)[0]); err == nil {
		t.Fatal("appending 150 after 200 succeeded")
	}

	reopen := func() {
		t.Helper()
		w.Close()
		w = openTestWAL(t, dir, 2048)
	}
	reopen()
	checkWAL(t, w, 1, 200, term(1))

	// The front, up to the middle of a segment (a snapshot's compaction).
	if err := w.DeleteRange(1, 77); err != nil {
		t.Fatal(err)
	}
	checkWAL(t, w, 78, 200, term(1))
	reopen()
	checkWAL(t, w, 78, 200, term(1))
	if after, _ := filepath.Glob(filepath.Join(dir, "*.seg")); len(after) >= len(segs) {
		t.Fatalf("%d segments after deleting 77 entries, %d before: the ones wholly deleted remain", len(after), len(segs))
	}

	// The back (a follower's conflicting entries), then new ones there.
	if err := w.DeleteRange(150, 200); err != nil {
		t.Fatal(err)
	}
	checkWAL(t, w, 78, 149, term(1))
	reopen()
	checkWAL(t, w, 78, 149, term(1))
	if err := w.StoreLogs(walEntries(150, 30, 2)); err != nil {
		t.Fatal(err)
	}
	termOf := func(i uint64) uint64 {
		if i >= 150 {
			return 2
		}
		return 1
	}
	checkWAL(t, w, 78, 179, termOf)
	reopen()
	checkWAL(t, w, 78, 179, termOf)

	if err := w.DeleteRange(10, 100); err != nil {
		t.Fatal(err)
	}
	if err := w.DeleteRange(120, 130); err == nil {
		t.Fatal("deleting from the middle succeeded")
	}
	checkWAL(t, w, 101, 179, termOf)

	// The whole log (a snapshot restore), then entries from anywhere.
	if err := w.DeleteRange(101, 179); err != nil {
		t.Fatal(err)
	}
	checkWAL(t, w, 0, 0, termOf)
	reopen()
	checkWAL(t, w, 0, 0, termOf)
	if err := w.StoreLogs(walEntries(140, 5, 3)); err != nil {
		t.Fatal(err)
	}
	checkWAL(t, w, 140, 144, term(3))
	reopen()
	checkWAL(t, w, 140, 144, term(3))

	// A gap (a snapshot installed without emptying the log): the log
	// before it is gone.
	if err := w.StoreLogs(walEntries(300, 4, 4)); err != nil {
		t.Fatal(err)
	}
	checkWAL(t, w, 300, 303, term(4))
	reopen()
	checkWAL(t, w, 300, 303, term(4))
}

// A torn last record (a crash during its write, before its sync
// returned) is cut off at open; what was before it stays, and the log
// takes the entry again. Garbage past the last record is cut off too.
func TestWALTornTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(path string) error
	}{
		{"truncated", func(path string) error {
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			return os.Truncate(path, st.Size()-3)
		}},
		{"garbage", func(path string) error {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Write([]byte{40, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7})
			return err
		}},
		{"zeros", func(path string) error {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Write(make([]byte, 4096))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			segs := writeSegments(t, dir)
			if err := tc.tear(segs[len(segs)-1]); err != nil {
				t.Fatal(err)
			}
			w := openTestWAL(t, dir, 1024)
			last := uint64(60)
			if tc.name == "truncated" {
				last = 59
			}
			checkWAL(t, w, 1, last, term(1))
			if err := w.StoreLogs(walEntries(last+1, 61-last, 1)); err != nil {
				t.Fatal(err)
			}
			w.Close()
			w = openTestWAL(t, dir, 1024)
			checkWAL(t, w, 1, 61, term(1))
		})
	}
}

// A bad record before the last segment is damage, not a torn write:
// the log refuses to open rather than lose acknowledged entries.
func TestWALDamageBeforeTheEndRefused(t *testing.T) {
	dir := t.TempDir()
	segs := writeSegments(t, dir)
	st, err := os.Stat(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(segs[0], st.Size()-1); err != nil {
		t.Fatal(err)
	}
	if w, err := OpenWAL(dir); err == nil {
		w.Close()
		t.Fatal("a WAL whose first segment lost its end opened")
	}
}

// The margin is zeros written ahead past the last segment's last record:
// the file reaches past it, appends overwrite the zeros, and a reopen
// reads every entry and cuts the zeros off (the next EnsureMargin writes
// them again).
func TestWALMarginKeepsTheLog(t *testing.T) {
	dir := t.TempDir()
	w := openTestWAL(t, dir, 1<<20)
	if err := w.EnsureMargin(); err != nil {
		t.Fatalf("EnsureMargin on an empty log: %v", err)
	}
	if err := w.StoreLogs(walEntries(1, 50, 1)); err != nil {
		t.Fatal(err)
	}
	if err := w.EnsureMargin(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	st, err := os.Stat(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() < w.segs[0].size+WALMargin {
		t.Fatalf("segment file of %d bytes after the margin, want at least its records' %d and %d more", st.Size(), w.segs[0].size, WALMargin)
	}
	if err := w.StoreLogs(walEntries(51, 10, 1)); err != nil {
		t.Fatal(err)
	}
	if st2, err := os.Stat(segs[0]); err != nil || st2.Size() != st.Size() {
		t.Fatalf("an append into the margin changed the file's size: %v, %v", st.Size(), st2)
	}
	w.Close()
	w = openTestWAL(t, dir, 1<<20)
	checkWAL(t, w, 1, 60, term(1))
	if err := w.StoreLogs(walEntries(61, 5, 1)); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w = openTestWAL(t, dir, 1<<20)
	checkWAL(t, w, 1, 65, term(1))
}

// A segment before the last may end in zeros (written ahead, left by a
// crash before it was cut when the next segment began): they are its
// end. Anything else after its records is damage.
func TestWALZerosEndAnEarlierSegment(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail []byte
		ok   bool
	}{
		{"zeros", make([]byte, 8192), true},
		{"zeros then garbage", append(make([]byte, 4096), 7), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			segs := writeSegments(t, dir)
			f, err := os.OpenFile(segs[0], os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(tc.tail); err != nil {
				t.Fatal(err)
			}
			f.Close()
			w, err := OpenWAL(dir)
			if !tc.ok {
				if err == nil {
					w.Close()
					t.Fatal("a WAL whose first segment ends in garbage opened")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w.segmentSize = 1024
			checkWAL(t, w, 1, 60, term(1))
			w.Close()
		})
	}
}
