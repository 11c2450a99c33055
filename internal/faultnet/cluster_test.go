package faultnet_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/internal/faultnet"
	"github.com/carmyhq/carmy/tests/testutil"
)

// faultNode is an in-process cluster node on its own loopback IP, with
// its own fault layer.
type faultNode struct {
	*cluster.Node
	ip     string
	faults *faultnet.Filter
}

func startFaultNode(t *testing.T, i int, join []string) *faultNode {
	t.Helper()
	ip := fmt.Sprintf("127.0.0.%d", 10+i)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("CARMY_TEST_LOGS") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	f := faultnet.NewWithLogger(log)
	n, err := cluster.Open(cluster.Config{
		NodeID: fmt.Sprintf("n%d", i), DataDir: t.TempDir(),
		RaftAddr: net.JoinHostPort(ip, "0"), GossipAddr: net.JoinHostPort(ip, "0"), HTTPAddr: ln.Addr().String(),
		Bootstrap: join == nil, Join: join, Fast: true, DeadGrace: time.Second, Logger: log.With("node", i),
		ClusterKey: "faultnet-test-cluster-key",
		Hooks:      cluster.Hooks{Dial: f.DialContext, RaftStream: f.StreamLayer, Gossip: f.Memberlist},
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	srv := &http.Server{Handler: n.PeerHandler()}
	go srv.Serve(f.Listener(ln))
	t.Cleanup(func() {
		srv.Close()
		n.Close()
	})
	return &faultNode{Node: n, ip: ip, faults: f}
}

// gossipSees reports whether n's gossip says id is in state.
func gossipSees(n *faultNode, id, state string) bool {
	st, err := n.Status(context.Background())
	if err != nil {
		return false
	}
	for _, m := range st.Nodes {
		if m.ID == id {
			return m.Gossip == state
		}
	}
	return false
}

// cut sets full cuts between a and each of others. In process, TCP dials
// leave from 127.0.0.1 whatever the node's IP, so DropIn does not catch
// them here (it does in containers); DropOut on both ends does.
func cut(t *testing.T, a *faultNode, others ...*faultNode) {
	t.Helper()
	var ips []string
	for _, o := range others {
		ips = append(ips, o.ip)
		r := o.faults.Rules()
		r.DropIn, r.DropOut = append(r.DropIn, a.ip), append(r.DropOut, a.ip)
		if err := o.faults.Set(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.faults.Set(faultnet.Rules{DropIn: ips, DropOut: ips}); err != nil {
		t.Fatal(err)
	}
}

// A three-node cluster wired through the fault layer: cutting the leader
// off makes the other two elect another and gossip declare it gone;
// healing brings it back as a follower.
func TestClusterPartitionAndHeal(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux's 127.0.0.0/8 on lo")
	}
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	n1 := startFaultNode(t, 1, nil)
	testutil.WaitUntil(t, 30*time.Second, "n1 leading", n1.IsLeader)
	nodes := []*faultNode{n1, startFaultNode(t, 2, []string{n1.HTTPAddr()}), startFaultNode(t, 3, []string{n1.HTTPAddr()})}
	testutil.WaitUntil(t, 30*time.Second, "every node ready and alive in gossip", func() bool {
		for _, n := range nodes {
			if n.Ready(context.Background()) != nil {
				return false
			}
			for _, m := range nodes {
				if !gossipSees(n, m.ID(), cluster.GossipAlive) {
					return false
				}
			}
		}
		return true
	})

	var leader *faultNode
	var rest []*faultNode
	for _, n := range nodes {
		if n.IsLeader() {
			leader = n
		} else {
			rest = append(rest, n)
		}
	}
	if leader == nil || len(rest) != 2 {
		t.Fatal("no single leader")
	}
	oldTerm := leader.Raft().CurrentTerm()
	cut(t, leader, rest...)
	testutil.WaitUntil(t, 30*time.Second, "a new leader among the majority, and the old one stepping down", func() bool {
		return !leader.IsLeader() && (rest[0].IsLeader() || rest[1].IsLeader()) && rest[0].Raft().CurrentTerm() > oldTerm
	})
	testutil.WaitUntil(t, 30*time.Second, "the majority's gossip losing the old leader", func() bool {
		return !gossipSees(rest[0], leader.ID(), cluster.GossipAlive) && !gossipSees(rest[1], leader.ID(), cluster.GossipAlive)
	})

	for _, n := range nodes {
		if err := n.faults.Set(faultnet.Rules{}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitUntil(t, 30*time.Second, "the cluster healed: one leader, every node ready and alive in gossip", func() bool {
		leaders := 0
		for _, n := range nodes {
			if n.IsLeader() {
				leaders++
			}
			if n.Ready(context.Background()) != nil {
				return false
			}
			for _, m := range nodes {
				if !gossipSees(n, m.ID(), cluster.GossipAlive) {
					return false
				}
			}
		}
		return leaders == 1
	})
}
