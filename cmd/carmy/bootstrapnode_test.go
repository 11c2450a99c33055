package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// freeAddrs returns n loopback addresses with ports free a moment ago.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ln.Addr().String())
		ln.Close()
	}
	return out
}

// TestBootstrapNodeOneCommandLine starts three nodes with the same flags
// but --node-id, as a StatefulSet does: the node --bootstrap-node names
// founds the cluster, the others join it, and every node takes calls.
func TestBootstrapNodeOneCommandLine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	clearCarmyEnv(t)
	// One command line, one key: each node would otherwise generate its
	// own, and none would let the others in.
	t.Setenv("CARMY_CLUSTER_KEY", testClusterKey)
	addrs := freeAddrs(t, 3)
	join := strings.Join(addrs, ",")
	var nodes []*runningServe
	for i, id := range []string{"b1", "b2", "b3"} {
		nodes = append(nodes, startServe(t, "--dev", "--node-id", id, "--http-addr", addrs[i], "--join", join, "--bootstrap-node", "b1"))
	}
	for _, n := range nodes {
		n.waitReady(t)
	}
	for i, n := range nodes {
		code, _, body := n.post(t, "/v1/tools/call", `{"tool":"echo","arguments":{"i":1},"request_id":"one-line"}`)
		if code != 200 || (i > 0) != strings.Contains(body, `"replayed":true`) {
			t.Fatalf("call through node %d: %d %s", i+1, code, body)
		}
	}
	_, status := nodes[2].get(t, "/v1/cluster", "")
	for _, id := range []string{`"b1"`, `"b2"`, `"b3"`} {
		if !strings.Contains(status, id) {
			t.Fatalf("the cluster lacks %s: %s", id, status)
		}
	}
	// The node writes its log in batches (at most 50 ms late): poll.
	testutil.WaitUntil(t, 10*time.Second, "b1 to say it founded the cluster", func() bool {
		return strings.Contains(nodes[0].logs.String(), "bootstrapped a new cluster")
	})
	for _, n := range nodes[1:] {
		if strings.Contains(n.logs.String(), "bootstrapped a new cluster") {
			t.Fatal("a node other than b1 founded a cluster")
		}
	}
}
