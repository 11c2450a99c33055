package guarantees_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// toolKind is what kind of tool a route calls: an HTTP tool of the config
// file, or an upstream MCP server's tool through the gateway.
type toolKind int

const (
	httpTool toolKind = iota
	gatewayHTTP
	gatewayStdio
)

// variant is which of a kind's tools a scenario needs: the calm one, one
// with a reconcile probe, one whose upstream a fault takes down, one whose
// connection may be cut (for stdio, cutting kills the child).
type variant int

const (
	calm variant = iota
	probed
	faulty
	cutting
)

// fixtures are the upstreams of one back end.
type fixtures struct {
	calm, fault          *httpUpstream
	stdio, stdioProbe    *stdioUpstream
	stdioFault, stdioCut *stdioUpstream
}

func newFixtures(tb testing.TB) *fixtures {
	tb.Helper()
	dir := tb.TempDir()
	sub := func(name string) string {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			tb.Fatal(err)
		}
		return d
	}
	return &fixtures{
		calm: startHTTPUpstream(tb, sub("calm")), fault: startHTTPUpstream(tb, sub("fault")),
		stdio: newStdioUpstream(tb, sub("stdio")), stdioProbe: newStdioUpstream(tb, sub("stdio-probe")),
		stdioFault: newStdioUpstream(tb, sub("stdio-fault")), stdioCut: newStdioUpstream(tb, sub("stdio-cut")),
	}
}

// tool returns the name of kind's tool of variant v and the ledger of its
// upstream.
func (f *fixtures) tool(k toolKind, v variant) (string, ledger) {
	switch k {
	case httpTool:
		switch v {
		case probed:
			return "actp", f.calm.ledger
		case faulty:
			return "actf", f.fault.ledger
		}
		return "act", f.calm.ledger
	case gatewayHTTP:
		switch v {
		case probed:
			return "ghp.act", f.calm.ledger
		case faulty:
			return "ghf.act", f.fault.ledger
		}
		return "gh.act", f.calm.ledger
	}
	switch v {
	case probed:
		return "gsp.act", f.stdioProbe.ledger
	case faulty:
		return "gsf.act", f.stdioFault.ledger
	case cutting:
		return "gsx.act", f.stdioCut.ledger
	}
	return "gs.act", f.stdio.ledger
}

// config is the nodes' config file: the HTTP tools and the MCP servers
// of every kind and variant.
func (f *fixtures) config(tb testing.TB) string {
	tb.Helper()
	c, p := f.calm.url(), f.fault.url()
	var b strings.Builder
	fmt.Fprintf(&b, "tools:\n")
	fmt.Fprintf(&b, "  - {name: act, timeout: 20s, http: {url: %q}}\n", c+"/act")
	fmt.Fprintf(&b, "  - {name: actp, timeout: 20s, http: {url: %q}, reconcile: {url: %q}}\n", c+"/act", c+"/probe/{request_id}")
	fmt.Fprintf(&b, "  - {name: actf, timeout: 20s, http: {url: %q}}\n", p+"/act")
	fmt.Fprintf(&b, "mcp_servers:\n")
	fmt.Fprintf(&b, "  - {name: gh, url: %q, timeout: 20s, tools: [act]}\n", c+"/mcp")
	fmt.Fprintf(&b, "  - {name: ghp, url: %q, timeout: 20s, reconcile_tool: find}\n", c+"/mcp")
	fmt.Fprintf(&b, "  - {name: ghf, url: %q, timeout: 20s, tools: [act]}\n", p+"/mcp")
	fmt.Fprintf(&b, "  - {name: gs, command: %s, timeout: 20s, tools: [act]}\n", f.stdio.command())
	fmt.Fprintf(&b, "  - {name: gsp, command: %s, timeout: 20s, reconcile_tool: find}\n", f.stdioProbe.command())
	fmt.Fprintf(&b, "  - {name: gsf, command: %s, timeout: 20s, tools: [act]}\n", f.stdioFault.command())
	fmt.Fprintf(&b, "  - {name: gsx, command: %s, timeout: 20s, tools: [act]}\n", f.stdioCut.command())
	path := filepath.Join(tb.TempDir(), "carmy.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// deployment is one back end's nodes.
type deployment interface {
	// entry is the node calls are sent to (a follower in a cluster);
	// other is another node (the same one when there is one).
	entry() *testutil.Node
	other() *testutil.Node
	// kill kills the entry node with SIGKILL; a node of one restarts it
	// at once, since only its own start can mark its executions.
	kill(t *testing.T)
	// restore brings the killed node back, serving.
	restore(t *testing.T)
}

// backend is how to start one back end.
type backend struct {
	name  string
	start func(t *testing.T, bin, config string) deployment
}

var backends = []backend{
	{"one", startOne},
	{"three", startThree},
	{"fleet", startFleet},
}

// one is a single Raft node.
type one struct {
	owner *testing.T // the back end's test, which the node outlives no cell of
	n     *testutil.Node
}

func startOne(t *testing.T, bin, config string) deployment {
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{}, "--dev", "--node-id", "n1", "--fast-failover", "--config", config)
	n.WaitReady(t, 60*time.Second)
	return &one{t, n}
}

func (o *one) entry() *testutil.Node { return o.n }
func (o *one) other() *testutil.Node { return o.n }
func (o *one) kill(t *testing.T) {
	o.n.Kill()
	o.n = relaunch(t, o.owner, o.n)
}
func (o *one) restore(t *testing.T) {}

// three is a three-node Raft cluster called on a follower.
type three struct {
	c                *testutil.Cluster
	follower, leader string
}

func startThree(t *testing.T, bin, config string) deployment {
	c := testutil.StartCluster(t, bin, 3, testutil.StartOptions{}, "--dev", "--fast-failover", "--config", config)
	leader := c.Leader(t, 60*time.Second)
	return &three{c: c, leader: leader.ID(), follower: c.Followers(leader)[0].ID()}
}

func (d *three) entry() *testutil.Node { return d.c.Node(d.follower) }
func (d *three) other() *testutil.Node { return d.c.Node(d.leader) }
func (d *three) kill(t *testing.T)     { d.entry().Kill() }
func (d *three) restore(t *testing.T) {
	d.c.Restart(t, d.follower)
	d.c.WaitFormed(t, 3, 60*time.Second)
}

// fleet is two nodes on one PostgreSQL database.
type fleet struct {
	owner *testing.T
	bin   string
	a, b  *testutil.Node
}

// lease is the fleet's heartbeat lease: a node silent longer is dead.
const lease = "2s"

func startFleet(t *testing.T, bin, config string) deployment {
	srv := testutil.NeedPostgres(t)
	url := srv.URL("postgres")
	start := func(id string) *testutil.Node {
		n := testutil.StartCarmy(t, bin, testutil.StartOptions{}, "--dev", "--node-id", id, "--store", url, "--store-lease", lease, "--config", config)
		n.WaitReady(t, 60*time.Second)
		return n
	}
	return &fleet{owner: t, bin: bin, a: start("a"), b: start("b")}
}

func (f *fleet) entry() *testutil.Node { return f.a }
func (f *fleet) other() *testutil.Node { return f.b }
func (f *fleet) kill(t *testing.T)     { f.a.Kill() }
func (f *fleet) restore(t *testing.T) {
	t.Helper()
	// A fleet node has no Raft or gossip address to keep: the same
	// command line on the same HTTP address.
	args := append(testutil.WithoutFlag(f.a.Args(), "--http-addr"), "--http-addr", f.a.Addr)
	n, err := testutil.Launch(f.owner, f.bin, testutil.StartOptions{}, args...)
	if err != nil {
		t.Fatal(err)
	}
	n.WaitReady(t, 60*time.Second)
	f.a = n
}

// relaunch starts n again (with its data and addresses) for a cell t, the
// new process owned by the back end's test, and waits until it is ready.
func relaunch(t, owner *testing.T, n *testutil.Node) *testutil.Node {
	t.Helper()
	m, err := n.Relaunch(owner)
	if err != nil {
		t.Fatal(err)
	}
	m.WaitReady(t, 60*time.Second)
	return m
}

// env is one back end under test: its nodes, its upstreams, the clients
// of each route, and the locks that keep faults from crossing cells.
type env struct {
	d   deployment
	fix *fixtures

	// world: cells hold it shared; killing the runner holds it alone.
	world sync.RWMutex
	// upstreamFault: cells that take the faulty upstreams down hold it.
	upstreamFault sync.Mutex
	// stdioCut: cells whose call kills its stdio child hold it.
	stdioCut sync.Mutex

	mu      sync.Mutex
	gen     int
	callers map[string]caller // route/base/gen → open client
}

// caller returns r's client of n, opened once per node process.
func (e *env) caller(t *testing.T, r route, n *testutil.Node) caller {
	t.Helper()
	e.mu.Lock()
	key := fmt.Sprintf("%s|%s|%d", r.name, n.URL, e.gen)
	c, ok := e.callers[key]
	e.mu.Unlock()
	if ok {
		return c
	}
	c, err := r.open(n.URL)
	if err != nil {
		t.Fatalf("%s: %v", r.name, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if old, ok := e.callers[key]; ok {
		c.close()
		return old
	}
	e.callers[key] = c
	return c
}

// forget drops every open client: a node was killed or restarted.
func (e *env) forget() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.callers {
		c.close()
	}
	e.callers = map[string]caller{}
	e.gen++
}
