package raftlog

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
)

// TestStoreLogsReusesItsBuffer checks that an append lays its records out
// in the buffer the append before it used, that a buffer over maxScratch
// is not kept, and that the entries read back whatever buffer wrote them.
func TestStoreLogsReusesItsBuffer(t *testing.T) {
	w := openTestWAL(t, t.TempDir(), 1<<30)
	entry := func(i uint64, size int) *raft.Log {
		return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, size)}
	}
	if err := w.StoreLogs([]*raft.Log{entry(1, 100), entry(2, 100)}); err != nil {
		t.Fatal(err)
	}
	kept := &w.scratch[:1][0]
	if err := w.StoreLogs([]*raft.Log{entry(3, 50)}); err != nil {
		t.Fatal(err)
	}
	if &w.scratch[:1][0] != kept {
		t.Error("the second append did not reuse the first one's buffer")
	}
	if err := w.StoreLogs([]*raft.Log{entry(4, maxScratch)}); err != nil {
		t.Fatal(err)
	}
	if cap(w.scratch) > maxScratch {
		t.Errorf("kept a buffer of %d bytes, over maxScratch", cap(w.scratch))
	}
	if err := w.StoreLogs([]*raft.Log{entry(5, 10)}); err != nil {
		t.Fatal(err)
	}
	for i, size := range []int{100, 100, 50, maxScratch, 10} {
		var l raft.Log
		if err := w.GetLog(uint64(i+1), &l); err != nil {
			t.Fatalf("GetLog(%d): %v", i+1, err)
		}
		if want := entry(uint64(i+1), size); !bytes.Equal(l.Data, want.Data) {
			t.Errorf("entry %d reads back %d bytes, not the %d written", i+1, len(l.Data), size)
		}
	}
}
