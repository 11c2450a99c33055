package raftlog

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
)

// fullStable is a stable store on a disk with no room but what the
// reserve file holds: its writes fail with ENOSPC while that file exists.
type fullStable struct {
	raft.StableStore
	reserve string
	writes  int
}

func (s *fullStable) SetUint64(key []byte, val uint64) error {
	s.writes++
	if _, err := os.Stat(s.reserve); err == nil {
		return &os.PathError{Op: "write", Path: "raft.db", Err: syscall.ENOSPC}
	}
	return nil
}

// A term write on a full disk goes through once the reserve is given
// back, instead of failing (which makes Raft panic); the reserve is made
// again, whole, once there is room; without a reserve to give, the
// disk-full error is returned as is.
func TestReservedStableGivesBackTheReserve(t *testing.T) {
	dir := t.TempDir()
	r := &Reserve{path: filepath.Join(dir, ReserveFile), size: 1 << 20, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	r.Ensure()
	if st, err := os.Stat(r.path); err != nil || st.Size() != 1<<20 {
		t.Fatalf("the reserve after ensure: %v, %v; want %d bytes", st, err, 1<<20)
	}
	inner := &fullStable{reserve: r.path}
	s := reservedStable{StableStore: inner, reserve: r}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatalf("SetUint64 on a full disk with a reserve: %v", err)
	}
	if inner.writes != 2 {
		t.Fatalf("%d writes, want 2 (the failed one, then the one after the reserve went)", inner.writes)
	}
	if _, err := os.Stat(r.path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the reserve is still there: %v", err)
	}
	r.Ensure()
	if st, err := os.Stat(r.path); err != nil || st.Size() != 1<<20 {
		t.Fatalf("the reserve after the disk has room again: %v, %v", st, err)
	}

	// No reserve to give: the error stands (the disk is full indeed).
	os.Remove(r.path)
	always := reservedStable{StableStore: &alwaysFull{}, reserve: r}
	if err := always.SetUint64([]byte("CurrentTerm"), 8); !DiskFull(err) {
		t.Fatalf("SetUint64 with no reserve left: %v, want the disk-full error", err)
	}
}

type alwaysFull struct{ raft.StableStore }

func (alwaysFull) SetUint64([]byte, uint64) error {
	return fmt.Errorf("bolt: %w", &os.PathError{Op: "write", Path: "raft.db", Err: syscall.ENOSPC})
}
