package embed_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/embed"
	"github.com/carmyhq/carmy/tests/testutil"
)

// startEmbedded starts a node of a Raft cluster in this process, on
// loopback ports the kernel picks: it founds the cluster when join is
// empty, else joins the node at join. runs counts its tool's runs.
func startEmbedded(t *testing.T, id, join string, runs *atomic.Int64) *embed.Node {
	t.Helper()
	return startMember(t, id, runs, func(raft *cluster.Config) {
		if join == "" {
			raft.Bootstrap = true
		} else {
			raft.Join = []string{join}
		}
	})
}

// startMember starts a node of a Raft cluster in this process, on
// loopback ports the kernel picks, its Raft config changed by configure
// (neither Bootstrap nor Join: it waits to be added). runs counts the
// runs of its tool, count.
func startMember(t *testing.T, id string, runs *atomic.Int64, configure func(*cluster.Config)) *embed.Node {
	t.Helper()
	app := carmy.App(carmy.WithNodeID(id), carmy.WithLogger(quietLogger()))
	app.Tool("count", func(_ context.Context, call carmy.Call) (any, error) {
		return map[string]int64{"run": runs.Add(1)}, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raft := &cluster.Config{NodeID: id, DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Fast: true,
		ClusterKey: "embedded-cluster-key-0123456789"}
	configure(raft)
	node, err := embed.StartNode(t.Context(), embed.Config{Runtime: app, Listener: ln, Raft: raft})
	if err != nil {
		t.Fatalf("StartNode %s: %v", id, err)
	}
	t.Cleanup(func() { _ = node.Close(context.Background()) }) // a no-op once the test closed it
	return node
}

// TestStartNodeEmbedsACluster embeds a 3-node cluster in one process: a
// call on one node replays on another (the tool ran once, anywhere), and
// each node closes cleanly.
func TestStartNodeEmbedsACluster(t *testing.T) {
	// Alone, not t.Parallel: its three nodes close at once, each within
	// cluster.DefaultShutdownTimeout, which a machine saturated by a cold
	// build beside the parallel tests once made n2 miss.
	if testing.Short() {
		t.Skip("starts a 3-node Raft cluster")
	}
	var runs atomic.Int64
	first := startEmbedded(t, "n1", "", &runs)
	nodes := []*embed.Node{first,
		startEmbedded(t, "n2", first.Addr().String(), &runs),
		startEmbedded(t, "n3", first.Addr().String(), &runs)}
	for _, n := range nodes {
		mustBeReady(t, n)
	}
	testutil.WaitFor(t, 30*time.Second, "three voters", func() error {
		for _, n := range nodes {
			st, err := n.Raft().Status(t.Context())
			if err != nil {
				return err
			}
			if len(st.Nodes) != 3 {
				return errors.New("not three members yet")
			}
		}
		return nil
	})

	call := func(n *embed.Node) *client.Result {
		t.Helper()
		c, err := client.New("http://" + n.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), "count", json.RawMessage(`{}`), client.RequestID("embed-1"))
		if err != nil {
			t.Fatalf("call on %s: %v", n.Addr(), err)
		}
		return res
	}
	ran := call(nodes[0])
	replay := call(nodes[2])
	if ran.Replayed || !replay.Replayed || replay.ExecutionID != ran.ExecutionID || string(replay.Data) != string(ran.Data) {
		t.Fatalf("call on n1 = %+v, retry on n3 = %+v: want the retry replayed from the first", ran, replay)
	}
	if got := runs.Load(); got != 1 {
		t.Fatalf("the tool ran %d times, want once", got)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.Close(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Close of n%d: %v", i+1, err)
		}
	}
	for i, n := range nodes {
		select {
		case <-n.Done():
		default:
			t.Errorf("n%d still serves after Close", i+1)
		}
	}
}

// TestStartNodeRefusesAnIncompleteConfig: without a runtime, or without
// exactly one backend, StartNode starts nothing and closes the listener.
func TestStartNodeRefusesAnIncompleteConfig(t *testing.T) {
	raft := &cluster.Config{NodeID: "n1"}
	for name, cfg := range map[string]embed.Config{
		"no runtime":    {Raft: raft},
		"no backend":    {Runtime: newApp(t)},
		"both backends": {Runtime: newApp(t), Raft: raft, Postgres: &embed.PostgresConfig{}},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listener = ln
		if node, err := embed.StartNode(t.Context(), cfg); err == nil || node != nil {
			t.Errorf("%s: StartNode = %v, %v; want an error", name, node, err)
		}
		if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("%s: the listener accepts after the refusal (%v), want it closed", name, err)
		}
	}
}
