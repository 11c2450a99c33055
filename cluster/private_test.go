package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// TestDataDirIsPrivate: a data dir left readable by others (0755, with a
// 0644 file in it, as an operator's mkdir and an old release left it) is
// made private when the node opens it, and the snapshots Raft writes
// later — which hashicorp/raft creates 0755 and 0644 — are private too.
func TestDataDirIsPrivate(t *testing.T) {
	t.Parallel()
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
	testutil.WaitUntil(t, 30*time.Second, "a leader", func() bool { return n.IsLeader() })
	for i := range 200 {
		mustReserve(t, n.Store(), key(fmt.Sprint("p-", i)), exec(n.ID()), store.Reserved)
	}
	testutil.WaitUntil(t, 30*time.Second, "a snapshot", func() bool {
		return n.Raft().Stats()["last_snapshot_index"] != "0"
	})
	seen := testutil.AssertPrivate(t, dir)
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
