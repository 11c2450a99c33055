package cluster_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store"
)

// assertPrivate fails the test unless every directory under dir is 0700
// and every file 0600 or tighter (issue 14, finding 7). It returns the
// paths it checked, relative to dir.
func assertPrivate(t *testing.T, dir string) []string {
	t.Helper()
	var seen []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) { // a snapshot reaped while walking
				return nil
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if strings.HasSuffix(filepath.Dir(rel), ".tmp") || strings.HasSuffix(rel, ".tmp") {
			// A snapshot being written: hashicorp/raft creates it with
			// the process's umask (this test's is not 077, carmy serve's
			// is) and it is made private when it closes; the 0700 data
			// dir keeps it from others meanwhile.
			return nil
		}
		seen = append(seen, rel)
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s is mode %v: others may read it", rel, perm)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// TestDataDirIsPrivate: a data dir left readable by others (0755, with a
// 0644 file in it, as an operator's mkdir and an old release left it) is
// made private when the node opens it, and the snapshots Raft writes
// later — which hashicorp/raft creates 0755 and 0644 — are private too.
func TestDataDirIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	if err := os.MkdirAll(filepath.Join(dir, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old", "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "n1", dir, true, nil, func(cfg *cluster.Config) {
		cfg.SnapshotThreshold = 64
		cfg.SnapshotInterval = 100 * time.Millisecond
	})
	waitFor(t, "a leader", 30*time.Second, func() bool { return n.IsLeader() })
	for i := range 200 {
		mustReserve(t, n.Store(), key(fmt.Sprint("p-", i)), exec(n.ID()), store.Reserved)
	}
	waitFor(t, "a snapshot", 30*time.Second, func() bool {
		return n.Raft().Stats()["last_snapshot_index"] != "0"
	})
	seen := assertPrivate(t, dir)
	var snapFiles int
	for _, p := range seen {
		if strings.HasPrefix(p, "snapshots"+string(filepath.Separator)) && strings.HasSuffix(p, "state.bin") {
			snapFiles++
		}
	}
	if snapFiles == 0 {
		t.Fatalf("no snapshot's state.bin among %v", seen)
	}
}
