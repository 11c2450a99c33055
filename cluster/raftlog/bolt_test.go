package raftlog

import (
	"path/filepath"
	"strings"
	"testing"
)

// A second process on a data dir in use is told so, and what to do, not
// bbolt's "timeout".
func TestOpenBoltLockedSaysWhy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	first, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	second, err := OpenBolt(path)
	if err == nil {
		second.Close()
		t.Fatal("a second open of a held raft.db succeeded")
	}
	for _, want := range []string{path, "locked by another process", "--data-dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
