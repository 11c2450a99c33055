package cluster_test

import (
	"bytes"
	"io"
	"log"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/tests/testutil"
)

var (
	gossipKey  = bytes.Repeat([]byte{7}, 32)
	otherKey   = bytes.Repeat([]byte{9}, 32)
	rotatedKey = bytes.Repeat([]byte{3}, 16)
)

// rogue starts a bare memberlist member on loopback with keys (none: in
// the clear) and has it try to join addr.
func rogue(t *testing.T, name, addr string, keys ...[]byte) *memberlist.Memberlist {
	t.Helper()
	mc := memberlist.DefaultLocalConfig()
	mc.Name, mc.BindAddr, mc.BindPort = name, "127.0.0.1", 0
	mc.Logger = log.New(io.Discard, "", 0)
	// Probes patient enough that a busy machine does not make members
	// flap between alive and suspect.
	mc.TCPTimeout, mc.ProbeInterval, mc.ProbeTimeout = 2*time.Second, time.Second, time.Second
	if len(keys) > 0 {
		kr, err := memberlist.NewKeyring(keys[1:], keys[0])
		if err != nil {
			t.Fatal(err)
		}
		mc.Keyring = kr
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ml.Shutdown() })
	_, _ = ml.Join([]string{addr})
	return ml
}

func gossipPort(t *testing.T, n *testNode) string {
	t.Helper()
	_, port, err := net.SplitHostPort(n.GossipAddr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strconv.Atoi(port); err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// TestGossipKeyKeepsStrangersOut checks that with a gossip key, members
// with the same key form the pool, and a member without the key or with
// another one can neither join nor be seen.
func TestGossipKeyKeepsStrangersOut(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, func(cfg *cluster.Config) { cfg.GossipKeys = [][]byte{gossipKey} })
	n1 := c.nodes[0]
	addr := gossipPort(t, n1)
	if got := n1.GossipMembers(); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
		t.Fatalf("the pool with one key holds %v, want n1 n2 n3", got)
	}
	clear := rogue(t, "intruder-clear", addr)
	wrong := rogue(t, "intruder-wrong-key", addr, otherKey)
	// A member with the key joins at once: once it is seen, the intruders
	// have had as long as it to join.
	friend := rogue(t, "friend", addr, gossipKey)
	testutil.WaitUntil(t, 10*time.Second, "the member with the key to be seen", func() bool {
		return slices.Contains(n1.GossipMembers(), "friend")
	})
	for _, n := range c.nodes {
		for _, name := range n.GossipMembers() {
			if name == "intruder-clear" || name == "intruder-wrong-key" {
				t.Errorf("%s sees %s in its pool", n.ID(), name)
			}
		}
	}
	if clear.NumMembers() > 1 || wrong.NumMembers() > 1 {
		t.Errorf("intruders see %d and %d members, want only themselves", clear.NumMembers(), wrong.NumMembers())
	}
	// The friend learnt the pool from n1 when it joined; on a busy machine
	// the fast test timers may have a member suspected for a moment, so
	// it is given until the deadline to see all three.
	testutil.WaitUntil(t, 10*time.Second, "the member with the key to see the pool of three and itself", func() bool {
		return friend.NumMembers() >= 4
	})
}

// TestGossipKeyRotation checks the rolling rotation docs/security.md gives: a
// node that encrypts with a new key and still accepts the old one talks
// with nodes on the old key.
func TestGossipKeyRotation(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, func(cfg *cluster.Config) {
		cfg.GossipKeys = [][]byte{gossipKey, rotatedKey}
		cfg.Fast = false // production gossip timers: no flapping on a busy machine
	})
	addr := gossipPort(t, c.nodes[0])
	old := rogue(t, "on-old-key", addr, gossipKey)
	next := rogue(t, "on-new-key", addr, rotatedKey, gossipKey)
	testutil.WaitUntil(t, 30*time.Second, "both generations in one pool", func() bool {
		m := c.nodes[0].GossipMembers()
		return slices.Contains(m, "on-old-key") && slices.Contains(m, "on-new-key") && old.NumMembers() == 3 && next.NumMembers() == 3
	})
}

func TestGossipKeyLength(t *testing.T) {
	cfg := cluster.Config{NodeID: "n1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		HTTPAddr: "127.0.0.1:1", GossipKeys: [][]byte{[]byte("short")}}
	if err := cfg.Validate(); err == nil {
		t.Fatal("a 5-byte gossip key was accepted")
	}
}
