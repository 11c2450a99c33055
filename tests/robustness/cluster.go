package robustness

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/tests/dockertest"
	"github.com/carmyhq/carmy/tests/testutil"
)

// Node settings of the harness: auth from the test image's config (not
// --dev, which turns auth off: the approver must be another principal
// than the caller), fast failure detection, and snapshots taken often so
// that lagging and restarted nodes install them.
var nodeArgs = []string{
	"--config", "/etc/carmy.yaml", "--fast-failover",
	"--snapshot-threshold", "64", "--snapshot-interval", "3s",
}

// ledgerPort is where the ledger container serves.
const ledgerPort = 9000

// testCluster is one run's nodes, each a container on a private network,
// and the ledger container.
type testCluster struct {
	t      testing.TB
	net    *dockertest.Network
	nc     *nodeClient
	ledger *dockertest.Container
	names  []string // n1…nN
	// fleet is the database of a fleet on PostgreSQL (fleet.go); nil for
	// a Raft cluster.
	fleet *fleetDB
}

// startCluster builds the test image, starts the ledger and size nodes
// (n1 bootstraps, the others join it), and waits until they form one
// cluster.
func startCluster(t testing.TB, size int) *testCluster {
	t.Helper()
	image := dockertest.BuildTestImage(t)
	names := make([]string, 0, size)
	for i := 1; i <= size; i++ {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	// Gossip is encrypted and Raft runs over mutual TLS, as in
	// production: every fault below also exercises the keyring and the
	// TLS layer (a wiped node rejoins with both).
	// The harness holds a certificate too ("harness"): the nodes' peer
	// endpoints (state digests) answer only over mutual TLS.
	hostTLS := writeNodeTLS(t, append(slices.Clone(names), "harness"))
	tokens := newRunTokens(t)
	network := dockertest.NewNetworkWith(t, fmt.Sprintf("robust%d", size), dockertest.Options{
		Image: image, Env: append([]string{"CARMY_TEST_FAULTS=1", "CARMY_GOSSIP_KEY=" + gossipKey(t)}, tokens.env()...),
		Mounts:         []string{hostTLS + ":" + tlsDir + ":ro"},
		DataTmpfsBytes: dataTmpfsBytes,
	})
	c := &testCluster{t: t, net: network, nc: newNodeClient(t, network.ClusterKey(), hostTLS, tokens)}
	ledger, err := network.StartHelper("ledger", "/ledger", ledgerPort, "--addr", fmt.Sprintf(":%d", ledgerPort))
	if err != nil {
		t.Fatalf("starting the ledger: %v", err)
	}
	c.ledger = ledger
	c.names = names
	for _, name := range c.names {
		if _, err := network.Launch(name, c.launchArgs(name, true)...); err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
	}
	if _, err := c.waitHealthy(context.Background(), 2*time.Minute); err != nil {
		t.Fatalf("the cluster did not form: %v\n%s", err, c.describe())
	}
	for _, name := range c.names {
		if logs := c.node(name).Logs(); !strings.Contains(logs, "gossip_encrypted=true node_tls=true") {
			t.Fatalf("%s does not say its gossip is encrypted and its Raft is TLS; logs:\n%s", name, logs)
		}
	}
	return c
}

// launchArgs are node name's arguments. When the cluster is first
// formed, n1 bootstraps (--bootstrap, which a restart repeats harmlessly); every other node, and any node started again with
// an empty data dir, joins the others (--join is used only while the data
// dir is empty; a wiped n1 that bootstrapped again would found a second
// cluster).
func (c *testCluster) launchArgs(name string, initial bool) []string {
	args := slices.Clone(nodeArgs)
	args = append(args, "--node-tls-ca", tlsDir+"/carmy-ca.pem",
		"--node-tls-cert", tlsDir+"/"+name+".pem", "--node-tls-key", tlsDir+"/"+name+"-key.pem")
	if initial && name == c.names[0] {
		return append(args, "--bootstrap")
	}
	var join []string
	for _, other := range c.names {
		if other != name {
			join = append(join, other+":8080")
		}
	}
	return append(args, "--join", strings.Join(join, ","))
}

// node returns node name's container (nil while it is removed).
func (c *testCluster) node(name string) *dockertest.Container { return c.net.Container(name) }

// urls implements endpoints: the nodes with a published port now.
func (c *testCluster) urls() map[string]string {
	out := map[string]string{}
	for _, name := range c.names {
		if n := c.node(name); n != nil {
			if u := n.URL(); u != "" {
				out[name] = u
			}
		}
	}
	return out
}

// waitHealthy waits until every node is ready, lists every node as a
// gossip-alive voter and names the same leader, which it returns; for a
// fleet, until it is whole (waitFleetWhole), and returns "".
func (c *testCluster) waitHealthy(ctx context.Context, timeout time.Duration) (string, error) {
	if c.fleet != nil { // no leader: whole is every node ready and alive
		return "", c.waitFleetWhole(ctx, timeout)
	}
	return c.waitAgreed(ctx, timeout, c.names, testutil.Agreement{Ready: true, Voters: len(c.names)})
}

// waitAgreed waits until the named nodes agree as want says, and returns
// their leader.
func (c *testCluster) waitAgreed(ctx context.Context, timeout time.Duration, names []string, want testutil.Agreement) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		leader, err := c.agreed(names, want)
		if err == nil {
			return leader, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("after %s: %w", timeout, err)
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return "", ctx.Err()
		}
	}
}

func (c *testCluster) agreed(names []string, want testutil.Agreement) (string, error) {
	cs := make([]*dockertest.Container, len(names))
	for i, name := range names {
		if cs[i] = c.node(name); cs[i] == nil {
			return "", fmt.Errorf("%s: removed", name)
		}
	}
	probes, err := dockertest.Probes(cs)
	if err != nil {
		return "", err
	}
	for i := range probes {
		probes[i].Token = c.nc.tokens.Admin // GET /v1/cluster is the admin's
	}
	return testutil.AgreedLeader(probes, want)
}

// leader returns the leader most reachable nodes name now, "" when none.
func (c *testCluster) leader() string {
	if c.fleet != nil {
		return "" // a fleet has none
	}
	votes := map[string]int{}
	for _, url := range c.urls() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := c.nc.status(ctx, url)
		cancel()
		if err == nil && st.LeaderID() != "" {
			votes[st.LeaderID()]++
		}
	}
	best := ""
	for id, n := range votes {
		if best == "" || n > votes[best] || n == votes[best] && id < best {
			best = id
		}
	}
	return best
}

// describe returns every node's view of the cluster, for failures.
func (c *testCluster) describe() string {
	if c.fleet != nil {
		return c.describeFleet()
	}
	var b strings.Builder
	for _, name := range c.names {
		n := c.node(name)
		if n == nil {
			fmt.Fprintf(&b, "%s: removed\n", name)
			continue
		}
		if n.URL() == "" {
			fmt.Fprintf(&b, "%s: not reachable\n", name)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		st, err := c.nc.status(ctx, n.URL())
		cancel()
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", name, err)
			continue
		}
		fmt.Fprintf(&b, "%s: leader %q voters %v commit %d applied %d entries %d\n",
			name, st.LeaderID(), st.Voters(), st.CommitIndex, st.AppliedIndex, st.Entries)
	}
	return b.String()
}

// sortedPairs iterates m in key order.
func sortedPairs[K cmp.Ordered, V any](m map[K]V) iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}

// gossipKey returns a fresh random gossip key, base64.
func gossipKey(t testing.TB) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k)
}

// tlsDir is where the nodes' TLS files are mounted.
const tlsDir = "/tls"

// writeNodeTLS writes a CA and a certificate per node into a fresh
// directory the containers' user can read, and returns it. The keys are
// world-readable: they are made for this run and thrown away with it.
func writeNodeTLS(t testing.TB, names []string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caPEM, caKey, err := certs.NewCA("robustness CA", 24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("carmy-ca.pem", caPEM)
	for _, name := range names {
		c, k, err := certs.NewNodeCert(caPEM, caKey, name, nil, nil, 24*time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		write(name+".pem", c)
		write(name+"-key.pem", k)
	}
	return dir
}
