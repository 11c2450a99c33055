package cluster_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/tests/testutil"
)

func unlessCluster(logs *testutil.SyncBuffer) func(*cluster.Config) {
	return func(cfg *cluster.Config) {
		cfg.BootstrapUnlessCluster = true
		if logs != nil {
			cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		}
	}
}

// TestBootstrapUnlessCluster checks the one-command-line bootstrap: the
// named node founds a cluster once the other member answers that it holds
// no state; a node with the same setting and an empty data dir whose
// member holds a cluster joins it instead of founding a second one; and a
// node whose member does not answer waits rather than found one.
func TestBootstrapUnlessCluster(t *testing.T) {
	t.Parallel()
	// n2 has no state and waits to be added; n1 may found the cluster.
	n2 := startNode(t, "n2", t.TempDir(), false, nil, nil)
	n1 := startNode(t, "n1", t.TempDir(), false, []string{n2.HTTPAddr()}, unlessCluster(nil))
	testutil.WaitUntil(t, 30*time.Second, "n1 to found a cluster and lead it", func() bool { return n1.IsLeader() })
	if n2.Raft().LastIndex() != 0 {
		t.Fatalf("n2 holds state (last index %d) though nobody added it", n2.Raft().LastIndex())
	}

	// A node like n1 with an empty data dir (a lost volume) whose member
	// holds a cluster joins it.
	n3 := startNode(t, "n3", t.TempDir(), false, []string{n1.HTTPAddr()}, unlessCluster(nil))
	testutil.WaitUntil(t, 30*time.Second, "n3 to join n1's cluster", func() bool {
		id, _ := n3.Leader()
		voter := false
		for _, s := range n1.Raft().GetConfiguration().Configuration().Servers {
			if s.ID == "n3" {
				voter = true
			}
		}
		return id == "n1" && voter
	})
	if n3.IsLeader() {
		t.Fatal("n3 leads: it founded a cluster of its own")
	}

	// A member that does not answer: the node waits.
	logs := &testutil.SyncBuffer{}
	n4 := startNode(t, "n4", t.TempDir(), false, []string{"127.0.0.1:1"}, unlessCluster(logs))
	testutil.WaitUntil(t, 30*time.Second, "n4 to ask twice", func() bool { return strings.Count(logs.String(), "bootstrap: waiting for a member to answer") >= 2 })
	if last := n4.Raft().LastIndex(); last != 0 || n4.IsLeader() {
		t.Fatalf("n4 founded a cluster (last index %d) though its member never answered", last)
	}
}
