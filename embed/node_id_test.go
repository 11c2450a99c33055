package embed_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/embed"
)

// TestStartNodeHasOneNodeID: a node has one id, the runtime's. A Raft
// member named otherwise (carmy.App left at its default, Raft.NodeID n7)
// is refused, saying both ids, and nothing is left running; with
// Raft.NodeID left empty the member takes the runtime's id, so records
// name the node the cluster knows.
func TestStartNodeHasOneNodeID(t *testing.T) {
	t.Parallel()
	raftConfig := func(id string) *cluster.Config {
		return &cluster.Config{NodeID: id, DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Fast: true,
			Bootstrap: true, ClusterKey: "embedded-cluster-key-0123456789"}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	node, err := embed.StartNode(t.Context(), embed.Config{Runtime: newApp(t), Listener: ln, Raft: raftConfig("n7")})
	if err == nil || !strings.Contains(err.Error(), `"n7"`) || !strings.Contains(err.Error(), `"node1"`) {
		if node != nil {
			_ = node.Close(context.Background())
		}
		t.Fatalf("StartNode with the runtime's default id and Raft.NodeID n7: %v; want a refusal naming both ids", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the listener accepts after the refusal (%v), want it closed", err)
	}

	app := newApp(t, carmy.WithNodeID("n7"))
	app.Tool("echo", func(_ context.Context, call carmy.Call) (any, error) { return call.Arguments, nil })
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raft := raftConfig("")
	node, err = embed.StartNode(t.Context(), embed.Config{Runtime: app, Listener: ln, Raft: raft})
	if err != nil {
		t.Fatalf("StartNode with Raft.NodeID empty: %v", err)
	}
	t.Cleanup(func() { _ = node.Close(context.Background()) })
	if raft.NodeID != "" {
		t.Errorf("StartNode changed the caller's Raft config: NodeID %q", raft.NodeID)
	}
	if id := node.Raft().ID(); id != "n7" {
		t.Fatalf("the Raft member's id is %q, want the runtime's, n7", id)
	}
	mustBeReady(t, node)
	c, err := client.New("http://" + node.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(t.Context(), "echo", map[string]int{"n": 1}, client.RequestID("one-id")); err != nil {
		t.Fatal(err)
	}
	rec, err := c.Lookup(t.Context(), "one-id", "")
	if err != nil || rec.NodeID != "n7" {
		t.Fatalf("the record: %+v, %v; want node_id n7", rec, err)
	}
	st, err := node.Raft().Status(t.Context())
	if err != nil || st.LeaderID != "n7" {
		t.Fatalf("the cluster's leader: %+v, %v; want n7", st, err)
	}
}
