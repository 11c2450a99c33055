package cluster_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
	"github.com/carmyhq/carmy/tests/testutil"
)

// export returns a node's whole audit ledger.
func export(t *testing.T, n *testNode) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := n.AuditExport(&b, 0, fsm.MaxExportLimit); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sameLedgers waits until every running node's ledger is the leader's
// and holds at least min entries, and returns the leader's export.
func sameLedgers(t *testing.T, nodes []*testNode, leader *testNode, min uint64) []byte {
	t.Helper()
	var want []byte
	var head audit.Head
	testutil.WaitUntil(t, 30*time.Second, "every node's audit ledger to equal the leader's", func() bool {
		h, err := leader.AuditHead()
		if err != nil || h.Seq < min {
			return false
		}
		want, head = export(t, leader), h
		if again, err := leader.AuditHead(); err != nil || again != h {
			return false // appended during the export: look again
		}
		for _, n := range nodes {
			if got, err := n.AuditHead(); err != nil || got != h || !bytes.Equal(export(t, n), want) {
				return false
			}
		}
		return true
	})
	v, err := audit.Verify(bytes.NewReader(want))
	if err != nil {
		t.Fatalf("the leader's ledger does not verify: %v", err)
	}
	// The head every node showed with that export: the leader may have
	// appended since (a join, a dead node's executions marked).
	if v.Head != head {
		t.Fatalf("verified head %+v, the nodes said %+v", v.Head, head)
	}
	return want
}

// TestAuditLedgerReplicated: calls on every node of a 3-node cluster
// append to one chain, the same on every node, with who decided each.
func TestAuditLedgerReplicated(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	for i, n := range c.nodes {
		s := n.Store()
		rec := mustReserve(t, s, key(fmt.Sprint("done-", i)), exec(n.ID()), store.Reserved)
		res := completed(rec.ExecutionID)
		if _, err := s.Complete(t.Context(), rec.Key, "fp", res); err != nil {
			t.Fatal(err)
		}
		rec = mustReserve(t, s, key(fmt.Sprint("cancel-", i)), exec(n.ID()), store.Reserved)
		ctx := store.WithActor(t.Context(), "bob")
		if _, err := s.Cancel(ctx, rec.ExecutionID, store.Result{ExecutionID: rec.ExecutionID, Status: store.StatusCancelled,
			Error: []byte(`{"code":"CANCELLED","message":"x"}`), FinishedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// Two joins (by the joining nodes), then three nodes × (reserved, completed, reserved,
	// cancelled).
	want := sameLedgers(t, c.nodes, c.leader(), 2+12)
	lines := strings.Count(string(want), "\n")
	if lines != 14 {
		t.Fatalf("%d entries, want 14:\n%s", lines, want)
	}
	for _, s := range []string{`"actor":"n2","execution_id":"","fingerprint":"","hash":`, `"kind":"join"`, `"target":"n3"`,
		`"actor":"bob"`, `"kind":"cancelled"`, `"actor":"n2","execution_id":"exec_test`, `"kind":"completed"`, `"actor":"p"`} {
		if !strings.Contains(string(want), s) {
			t.Errorf("the ledger has no %s:\n%s", s, want)
		}
	}
}

// TestAuditLedgerSnapshotAndRestart: a node that restarts after the log
// it missed was compacted, and a node that joins then, install the
// leader's snapshot and end with its chain, without a duplicate entry;
// and they go on appending alike.
func TestAuditLedgerSnapshotAndRestart(t *testing.T) {
	t.Parallel()
	tune := func(cfg *cluster.Config) {
		cfg.SnapshotThreshold = 64
		cfg.SnapshotInterval = 100 * time.Millisecond
	}
	c := newCluster(t, 3, tune)
	lag := c.followers()[0]
	lag.stop()
	leader := c.leader()
	for i := range 300 {
		mustReserve(t, leader.Store(), key(fmt.Sprint("s-", i)), exec(leader.ID()), store.Reserved)
	}
	testutil.WaitUntil(t, 30*time.Second, "the leader to snapshot and compact", func() bool {
		return leader.Raft().Stats()["last_snapshot_index"] != "0"
	})
	back := startNode(t, lag.cfg.NodeID, lag.cfg.DataDir, false, nil, tune)
	fresh := startNode(t, "n4", t.TempDir(), false, []string{leader.HTTPAddr()}, tune)
	c.mu.Lock()
	c.nodes = append(c.nodes, back, fresh)
	c.mu.Unlock()
	if _, err := leader.AddNode(context.Background(), back.Info()); err != nil {
		t.Fatal(err)
	}
	running := []*testNode{leader, back, fresh}
	for _, n := range c.followers() {
		if n != back && n != fresh {
			running = append(running, n)
		}
	}
	sameLedgers(t, running, leader, 2+300+1)
	for i, n := range running {
		mustReserve(t, n.Store(), key(fmt.Sprint("after-", i)), exec(n.ID()), store.Reserved)
	}
	sameLedgers(t, running, leader, 2+300+1+uint64(len(running)))
}

// TestAuditSignedCheckpoints: a cluster whose leader holds a signing key
// appends checkpoint entries signing the head — replicated to every node
// and exported — whose signatures verify by the public key, and signs
// again only once the head moved: never a checkpoint of a checkpoint.
func TestAuditSignedCheckpoints(t *testing.T) {
	t.Parallel()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, 3, func(cfg *cluster.Config) {
		cfg.AuditSigningKey, cfg.AuditCheckpointEvery = priv, 20*time.Millisecond
	})
	leader := c.leader()
	verified := func(min int) audit.Verified {
		var v audit.Verified
		testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("%d signed checkpoints", min), func() error {
			var err error
			v, err = audit.VerifyWith(bytes.NewReader(export(t, leader)), pub)
			if err == nil && v.Checkpoints < min {
				err = fmt.Errorf("%d checkpoints", v.Checkpoints)
			}
			return err
		})
		return v
	}
	first := verified(1)
	for i := range 3 {
		mustReserve(t, leader.Store(), key(fmt.Sprint("signed-", i)), exec(leader.ID()), store.Reserved)
	}
	second := verified(first.Checkpoints + 1)
	if second.LastSigned <= first.LastSigned {
		t.Errorf("the new checkpoint signs seq %d, not past %d", second.LastSigned, first.LastSigned)
	}
	// Every node holds the same checkpoints.
	want := sameLedgers(t, c.nodes, leader, second.Head.Seq)
	if !strings.Contains(string(want), `"key_id":"`+audit.KeyID(pub)+`"`) {
		t.Fatalf("no checkpoint entry with the key's id:\n%s", want)
	}
	// Many rounds ran (every 20 ms): none signed a head that was itself a
	// checkpoint.
	prev := ""
	for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
		kind := ""
		if strings.Contains(line, `"kind":"checkpoint"`) {
			kind = "checkpoint"
		}
		if kind == "checkpoint" && prev == "checkpoint" {
			t.Fatalf("a checkpoint right after a checkpoint:\n%s", want)
		}
		prev = kind
	}
}
