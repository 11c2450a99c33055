package testutil

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/api/wire"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// Helpers for clusters of carmy processes. They read the text log format
// (the default; not --log-format json).

var startedLine = regexp.MustCompile(`msg="node started" .*?raft_addr=(\S+) gossip_addr=(\S+)`)

// Args returns the arguments the node was started with, after "serve" (the
// addresses Launch defaulted are not among them).
func (n *Node) Args() []string { return slices.Clone(n.args) }

// nodeIDField is the node id its log names (the API's "serving" line
// does, before Launch returns).
var nodeIDField = regexp.MustCompile(`\bnode_id=(\S+)`)

// ID returns the node's --node-id, or when none was given the id the node
// took (kept in its data dir) as its log names it; "" until it logged one.
func (n *Node) ID() string {
	if id, ok := flagValue(n.args, "--node-id"); ok {
		return id
	}
	if m := nodeIDField.FindStringSubmatch(n.Logs()); m != nil {
		return m[1]
	}
	return ""
}

// RaftAddr returns the Raft address the node bound, from its log line
// `msg="node started" … raft_addr=…`; "" until it printed it.
func (n *Node) RaftAddr() string {
	if m := startedLine.FindStringSubmatch(n.Logs()); m != nil {
		return m[1]
	}
	return ""
}

// GossipAddr returns the gossip address the node bound, from the same log
// line as RaftAddr; "" until it printed it.
func (n *Node) GossipAddr() string {
	if m := startedLine.FindStringSubmatch(n.Logs()); m != nil {
		return m[2]
	}
	return ""
}

// Running reports whether the process has not exited.
func (n *Node) Running() bool {
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Restart starts the node again once its process has exited (after Kill
// or Stop): the same binary, working directory, environment and arguments
// (or args, when given), hence the same data dir, and the HTTP, Raft and
// gossip addresses the previous process bound, so that the other members
// reach it where they know it. It waits until the new process serves its
// API and returns it. The new process lives as long as tb's test.
func (n *Node) Restart(tb testing.TB, args ...string) *Node {
	tb.Helper()
	m, err := n.relaunch(tb, args)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// Relaunch is Restart for a subtest that restarts a node of its parent:
// the new process lives as long as owner (the test that started the
// node), and an error is returned rather than failing either test.
func (n *Node) Relaunch(owner testing.TB, args ...string) (*Node, error) {
	return n.relaunch(owner, args)
}

// relaunch is Restart with the new process's lifetime owned by owner.
func (n *Node) relaunch(owner testing.TB, args []string) (*Node, error) {
	if n.Running() {
		return nil, fmt.Errorf("restart of %s: the process still runs", n.ID())
	}
	if args == nil {
		args = n.Args()
	}
	raft, gossip := n.RaftAddr(), n.GossipAddr()
	if raft == "" || gossip == "" || n.Addr == "" {
		return nil, fmt.Errorf("restart of %s: its previous addresses are unknown (no \"node started\" or \"serving the API\" log line)", n.ID())
	}
	for _, f := range []string{"--http-addr", "--raft-addr", "--gossip-addr"} {
		args = WithoutFlag(args, f)
	}
	args = append(args, "--http-addr", n.Addr, "--raft-addr", raft, "--gossip-addr", gossip)
	return launch(owner, n.bin, n.opts, args)
}

// WithoutFlag returns args without the flag name (such as "--join") and
// its value, whether spelled "--join x" or "--join=x". It is meant for
// flags that take a value; a boolean flag must be spelled "--flag=true"
// to be dropped alone.
func WithoutFlag(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == name:
			i++ // and its value
		case strings.HasPrefix(args[i], name+"="):
		default:
			out = append(out, args[i])
		}
	}
	return out
}

// flagValue returns the value of a flag that takes one.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// ClusterStatus is the answer of GET /v1/cluster (docs/api.md#cluster-administration), the API's
// wire type, with the questions tests ask of it.
type ClusterStatus wire.ClusterStatus

// ClusterMember is one entry of ClusterStatus.Nodes.
type ClusterMember = wire.ClusterNode

// LeaderID returns the leader's id, "" when none is known.
func (s ClusterStatus) LeaderID() string {
	if s.Leader == nil {
		return ""
	}
	return s.Leader.ID
}

// Member returns the member id, if listed.
func (s ClusterStatus) Member(id string) (ClusterMember, bool) {
	for _, m := range s.Nodes {
		if m.ID == id {
			return m, true
		}
	}
	return ClusterMember{}, false
}

// Voters returns the ids of the voters, sorted.
func (s ClusterStatus) Voters() []string {
	var ids []string
	for _, m := range s.Nodes {
		if m.Suffrage == "voter" {
			ids = append(ids, m.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

var statusClient = &http.Client{Timeout: 3 * time.Second}

// ClusterStatus asks the node for GET /v1/cluster (with
// StartOptions.StatusToken, if any).
func (n *Node) ClusterStatus(ctx context.Context) (ClusterStatus, error) {
	st, err := FetchClusterStatusAs(ctx, n.URL, n.opts.StatusToken)
	if err != nil {
		return st, fmt.Errorf("%s: %w", n.ID(), err)
	}
	return st, nil
}

// Ready reports whether GET /readyz answers 200.
func (n *Node) Ready() error {
	if err := CheckReady(context.Background(), n.URL); err != nil {
		return fmt.Errorf("%s: %w", n.ID(), err)
	}
	return nil
}

// FetchClusterStatus asks the node at baseURL (http://host:port) for GET
// /v1/cluster, without auth, once, through the Go client.
func FetchClusterStatus(ctx context.Context, baseURL string) (ClusterStatus, error) {
	return FetchClusterStatusAs(ctx, baseURL, "")
}

// FetchClusterStatusAs is FetchClusterStatus with token as the bearer
// token ("" for none).
func FetchClusterStatusAs(ctx context.Context, baseURL, token string) (ClusterStatus, error) {
	opts := []client.Option{client.WithHTTPClient(statusClient), client.WithRetry(client.NoRetry)}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	c, err := client.New(baseURL, opts...)
	if err != nil {
		return ClusterStatus{}, err
	}
	st, err := c.ClusterStatus(ctx)
	if err != nil {
		return ClusterStatus{}, err
	}
	return ClusterStatus(st.ClusterStatus), nil
}

// CheckReady returns nil when the node at baseURL answers GET /readyz
// with 200.
func CheckReady(ctx context.Context, baseURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := statusClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("/readyz %d %s", resp.StatusCode, raw)
	}
	return nil
}

// WaitFor polls cond until it returns nil, and fails the test with cond's
// last error when timeout passes first (wait.For).
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() error) {
	tb.Helper()
	wait.For(tb, timeout, what, cond)
}

// WaitUntil is WaitFor for a condition that holds or not (wait.Until).
func WaitUntil(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	wait.Until(tb, timeout, what, cond)
}

// ClusterKey is the --cluster-key StartCluster and Cluster.Add give every
// node, unless its arguments or environment give a key or node TLS.
const ClusterKey = "testutil-cluster-key-0123456789"

// Cluster is a set of carmy processes on loopback, started together by
// StartCluster. The processes live as long as the test that started the
// cluster, even when a subtest restarts or adds one. Its methods may be
// called from that test and its subtests (one at a time).
type Cluster struct {
	owner testing.TB
	bin   string
	opts  StartOptions

	mu    sync.Mutex
	nodes []*Node // the current process of each member, by id order of start
}

// StartCluster starts size nodes "n1"…"nN", each with args, its own data
// dir under tb.TempDir() and ports chosen by the kernel: n1 with
// --bootstrap, the others with --join and n1's HTTP address. It waits
// until every node answers /readyz 200 and its GET /v1/cluster lists size
// voters, all gossip-alive, and the same leader. On failure the test's log
// gets every node's view of the cluster (and, as for every node, its
// output).
func StartCluster(tb testing.TB, bin string, size int, opts StartOptions, args ...string) *Cluster {
	tb.Helper()
	c := &Cluster{owner: tb, bin: bin, opts: opts}
	for i := 1; i <= size; i++ {
		extra := []string{"--bootstrap"}
		if i > 1 {
			extra = []string{"--join", c.nodes[0].Addr}
		}
		c.Add(tb, fmt.Sprintf("n%d", i), append(slices.Clone(args), extra...)...)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Log(c.Describe())
		}
	})
	c.WaitFormed(tb, size, 60*time.Second)
	return c
}

// Add starts another node, id, with args plus --node-id and its own
// --data-dir: with neither --bootstrap nor --join in args it waits to be
// added (POST /v1/cluster/nodes). The cluster tracks it from now on.
func (c *Cluster) Add(t testing.TB, id string, args ...string) *Node {
	t.Helper()
	dataDir := filepath.Join(c.owner.TempDir(), id)
	full := append([]string{"--node-id", id, "--data-dir", dataDir}, args...)
	if !hasFlag(args, "--cluster-key") && !hasFlag(args, "--cluster-key-file") && !hasFlag(args, "--node-tls-ca") && !TestTLS() &&
		!slices.ContainsFunc(c.opts.Env, func(e string) bool { return strings.HasPrefix(e, "CARMY_CLUSTER_KEY") }) {
		// The nodes of a cluster share a key (each would otherwise
		// generate its own, and none could join another).
		full = append(full, "--cluster-key", ClusterKey)
	}
	n, err := launch(c.owner, c.bin, c.opts, full)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	return n
}

// Restart restarts the member id (whose process must have exited) like
// Node.Restart, and tracks the new process in its place.
func (c *Cluster) Restart(t testing.TB, id string, args ...string) *Node {
	t.Helper()
	old := c.Node(id)
	if old == nil {
		t.Fatalf("restart: no node %s", id)
	}
	var nargs []string
	if len(args) > 0 {
		nargs = args
	}
	n, err := old.relaunch(c.owner, nargs)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	for i := range c.nodes {
		if c.nodes[i] == old {
			c.nodes[i] = n
		}
	}
	c.mu.Unlock()
	return n
}

// Discard kills node id's process and stops tracking it (for a node
// removed from the cluster).
func (c *Cluster) Discard(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes = slices.DeleteFunc(c.nodes, func(n *Node) bool {
		if n.ID() == id {
			n.Kill()
			return true
		}
		return false
	})
}

// Node returns the current process of member id, or nil.
func (c *Cluster) Node(id string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.ID() == id {
			return n
		}
	}
	return nil
}

// Nodes returns every tracked node, running or not.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes)
}

// Running returns the tracked nodes whose process runs.
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, n := range c.Nodes() {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// WaitStatus polls GET /v1/cluster on every running node until check
// accepts every answer, or fails the test after timeout with the last
// reason check gave.
func (c *Cluster) WaitStatus(t testing.TB, timeout time.Duration, what string, check func(n *Node, st ClusterStatus) error) {
	t.Helper()
	WaitFor(t, timeout, what, func() error {
		nodes := c.Running()
		if len(nodes) == 0 {
			return errors.New("no node runs")
		}
		for _, n := range nodes {
			st, err := n.ClusterStatus(context.Background())
			if err != nil {
				return err
			}
			if err := check(n, st); err != nil {
				return fmt.Errorf("%s: %w", n.ID(), err)
			}
		}
		return nil
	})
}

// WaitFormed waits until every running node is ready (/readyz 200) and
// lists voters running members, all gossip-alive, with one leader that
// every node names.
func (c *Cluster) WaitFormed(t testing.TB, voters int, timeout time.Duration) {
	t.Helper()
	WaitFor(t, timeout, fmt.Sprintf("a cluster of %d ready voters, all alive, with one leader", voters), func() error {
		_, err := AgreedLeader(probesOf(c.Running()), Agreement{Ready: true, Voters: voters})
		return err
	})
}

// Leader waits until every running node names the same leader, one of the
// running nodes, and returns it.
func (c *Cluster) Leader(t testing.TB, timeout time.Duration) *Node {
	t.Helper()
	var leader *Node
	WaitFor(t, timeout, "a leader every running node names", func() error {
		nodes := c.Running()
		id, err := AgreedLeader(probesOf(nodes), Agreement{})
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.ID() == id {
				leader = n
				return nil
			}
		}
		return fmt.Errorf("the leader named, %q, is not a running node", id)
	})
	return leader
}

// Probe names a node and its API's base URL, for AgreedLeader, and the
// bearer token its GET /v1/cluster needs ("" for none).
type Probe struct{ Name, URL, Token string }

func probesOf(nodes []*Node) []Probe {
	out := make([]Probe, len(nodes))
	for i, n := range nodes {
		out[i] = Probe{Name: n.ID(), URL: n.URL, Token: n.opts.StatusToken}
	}
	return out
}

// Agreement says what AgreedLeader requires beyond one agreed leader.
type Agreement struct {
	// Ready: every node answers /readyz with 200.
	Ready bool
	// Voters, when positive: every node lists that many voters, all
	// gossip-alive.
	Voters int
	// NotLeader: a node that must not be the leader (one that is gone).
	NotLeader string
}

// AgreedLeader asks every node for GET /v1/cluster and returns the leader
// they all name, or an error saying which node disagrees or falls short
// of want.
func AgreedLeader(nodes []Probe, want Agreement) (string, error) {
	ctx := context.Background()
	leader := ""
	for _, n := range nodes {
		if want.Ready {
			if err := CheckReady(ctx, n.URL); err != nil {
				return "", fmt.Errorf("%s: %w", n.Name, err)
			}
		}
		st, err := FetchClusterStatusAs(ctx, n.URL, n.Token)
		if err != nil {
			return "", fmt.Errorf("%s: %w", n.Name, err)
		}
		if want.Voters > 0 {
			if got := st.Voters(); len(got) != want.Voters {
				return "", fmt.Errorf("%s lists voters %v", n.Name, got)
			}
			for _, m := range st.Nodes {
				if m.Gossip != "alive" {
					return "", fmt.Errorf("%s sees %s %s", n.Name, m.ID, m.Gossip)
				}
			}
		}
		switch id := st.LeaderID(); {
		case id == "" || id == want.NotLeader:
			return "", fmt.Errorf("%s names leader %q", n.Name, id)
		case leader != "" && id != leader:
			return "", fmt.Errorf("%s names leader %s, another names %s", n.Name, id, leader)
		default:
			leader = id
		}
	}
	return leader, nil
}

// Followers returns the running nodes other than leader.
func (c *Cluster) Followers(leader *Node) []*Node {
	var out []*Node
	for _, n := range c.Running() {
		if n != leader {
			out = append(out, n)
		}
	}
	return out
}

// Describe returns every node's state and view of the cluster, for
// failure messages.
func (c *Cluster) Describe() string {
	var b strings.Builder
	b.WriteString("cluster state:\n")
	for _, n := range c.Nodes() {
		if !n.Running() {
			fmt.Fprintf(&b, "  %s (%s): exited: %v\n", n.ID(), n.Addr, n.ExitErr())
			continue
		}
		ready := "ready"
		if err := n.Ready(); err != nil {
			ready = err.Error()
		}
		st, err := n.ClusterStatus(context.Background())
		if err != nil {
			fmt.Fprintf(&b, "  %s (%s): %s; %v\n", n.ID(), n.Addr, ready, err)
			continue
		}
		raw, _ := json.Marshal(st)
		fmt.Fprintf(&b, "  %s (%s): %s; %s\n", n.ID(), n.Addr, ready, raw)
	}
	return b.String()
}
