package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/internal/tlsmux"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// testTLS reports whether CARMY_TEST_TLS asks every test node to run with
// node TLS (a CA per test), so that the whole suite runs over mutual TLS.
// A test that checks plain-HTTP behaviour opts out in its tune function.
func testTLS() bool { return os.Getenv("CARMY_TEST_TLS") != "" }

// testCAs holds each test's CA: PEM, key and its file.
var testCAs sync.Map // testing.TB -> *testCA

type testCA struct {
	once         sync.Once
	dir, file    string
	certPEM, key []byte
	err          error
}

// testTLSFiles writes a certificate for id under the test's CA.
func testTLSFiles(tb testing.TB, id string) cluster.NodeTLS {
	tb.Helper()
	v, _ := testCAs.LoadOrStore(tb, &testCA{})
	ca := v.(*testCA)
	ca.once.Do(func() {
		ca.dir = tb.TempDir()
		ca.certPEM, ca.key, ca.err = certs.NewCA("test CA", time.Hour, time.Now())
		if ca.err == nil {
			ca.file = filepath.Join(ca.dir, "ca.pem")
			ca.err = os.WriteFile(ca.file, ca.certPEM, 0o600)
		}
		tb.Cleanup(func() { testCAs.Delete(tb) })
	})
	if ca.err != nil {
		tb.Fatal(ca.err)
	}
	c, k, err := certs.NewNodeCert(ca.certPEM, ca.key, id, nil, nil, time.Hour, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	f := cluster.NodeTLS{CAFile: ca.file, CertFile: filepath.Join(ca.dir, id+".pem"), KeyFile: filepath.Join(ca.dir, id+"-key.pem")}
	if err := os.WriteFile(f.CertFile, c, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(f.KeyFile, k, 0o600); err != nil {
		tb.Fatal(err)
	}
	return f
}

// testClusterKey is the cluster key of every test node, unless a test's
// tune function gives another (or TLS instead).
const testClusterKey = "test-cluster-key-0123456789abcdef"

// testNode is a node with the HTTP server that carries its peer
// endpoints, all on 127.0.0.1 ports the kernel chose.
type testNode struct {
	*cluster.Node
	cfg      cluster.Config
	ln       net.Listener
	mu       sync.Mutex
	srv      *http.Server // nil once stopped
	stopOnce sync.Once
	// handler serves the node's peer endpoints: PeerHandler, or
	// what intercept put in front of it.
	handler atomic.Pointer[http.Handler]
}

// intercept puts wrap in front of the node's peer endpoints, so a
// test can play a node that answers otherwise.
func (tn *testNode) intercept(wrap func(next http.Handler) http.Handler) {
	h := wrap(tn.PeerHandler())
	tn.handler.Store(&h)
}

type testCluster struct {
	t     testing.TB
	mu    sync.Mutex
	nodes []*testNode
}

func testLogger(tb testing.TB) *slog.Logger {
	if os.Getenv("CARMY_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", tb.Name())
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startNode opens a node; with join it asks those HTTP addresses to add it.
func startNode(tb testing.TB, id, dir string, bootstrap bool, join []string, tune func(*cluster.Config)) *testNode {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	cfg := cluster.Config{
		NodeID: id, DataDir: dir, RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		HTTPAddr: ln.Addr().String(), Bootstrap: bootstrap, Join: join,
		Fast: true, LeaderWait: 5 * time.Second, DeadGrace: time.Second, Logger: testLogger(tb),
		// Node-to-node calls and Raft are authenticated by a key (or node
		// TLS), never by address: every test node shares this one.
		ClusterKey: testClusterKey,
	}
	if testTLS() {
		f := testTLSFiles(tb, id)
		cfg.TLS = &f
	}
	if tune != nil {
		tune(&cfg) // may set TLS, or take it away
	}
	n, err := cluster.Open(cfg)
	if err != nil {
		ln.Close()
		tb.Fatalf("Open(%s): %v", id, err)
	}
	tn := &testNode{Node: n, cfg: cfg, ln: ln}
	h := n.PeerHandler()
	tn.handler.Store(&h)
	tn.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*tn.handler.Load()).ServeHTTP(w, r)
	})}
	if cfg.TLS != nil {
		// As carmy serve does: other nodes come over mutual TLS.
		tn.ln = tlsmux.New(ln, tlsmux.Config(nil, n.ServerTLSConfig()), 0)
	}
	go tn.srv.Serve(tn.ln)
	// Registered after the data dir's removal, so it runs before it.
	tb.Cleanup(tn.stop)
	return tn
}

// stop closes the node and its server (idempotent, safe from any
// goroutine).
func (tn *testNode) stop() {
	tn.stopOnce.Do(func() {
		tn.mu.Lock()
		srv := tn.srv
		tn.srv = nil
		tn.mu.Unlock()
		srv.Close()
		_ = tn.Close()
	})
}

// running reports whether stop has not been called.
func (tn *testNode) running() bool {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.srv != nil
}

// newCluster starts size nodes (the first bootstraps, the others join it)
// and waits until all are ready.
func newCluster(tb testing.TB, size int, tune func(*cluster.Config)) *testCluster {
	tb.Helper()
	c := &testCluster{t: tb}
	tb.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, n := range c.nodes {
			n.stop()
		}
	})
	first := startNode(tb, "n1", tb.TempDir(), true, nil, tune)
	c.nodes = append(c.nodes, first)
	for i := 2; i <= size; i++ {
		c.nodes = append(c.nodes, startNode(tb, fmt.Sprintf("n%d", i), tb.TempDir(), false, []string{first.HTTPAddr()}, tune))
	}
	c.waitReady()
	testutil.WaitUntil(tb, 30*time.Second, "gossip to see every member alive", func() bool {
		for _, n := range c.nodes {
			st, err := n.Status(context.Background())
			if err != nil || len(st.Nodes) != size {
				return false
			}
			for _, m := range st.Nodes {
				if m.Gossip != cluster.GossipAlive {
					return false
				}
			}
		}
		return true
	})
	return c
}

func (c *testCluster) waitReady() {
	c.t.Helper()
	testutil.WaitUntil(c.t, 30*time.Second, "every node ready", func() bool {
		for _, n := range c.nodes {
			if !n.running() {
				continue
			}
			if n.Ready(context.Background()) != nil {
				return false
			}
		}
		return true
	})
}

// leader returns the running node that leads.
func (c *testCluster) leader() *testNode {
	c.t.Helper()
	var l *testNode
	testutil.WaitUntil(c.t, 30*time.Second, "a leader", func() bool {
		for _, n := range c.nodes {
			if n.running() && n.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// followers returns the running nodes that do not lead.
func (c *testCluster) followers() []*testNode {
	l := c.leader()
	var out []*testNode
	for _, n := range c.nodes {
		if n != l && n.running() {
			out = append(out, n)
		}
	}
	return out
}

var execN sync.Mutex
var execCount int

func exec(node string) store.Execution {
	execN.Lock()
	execCount++
	n := execCount
	execN.Unlock()
	return store.Execution{ID: fmt.Sprintf("exec_test_%d_%d", time.Now().UnixNano(), n), Tool: "t", NodeID: node,
		StartedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
}

func key(id string) store.Key { return store.Key{Principal: "p", Session: "s", RequestID: id} }

func mustReserve(tb testing.TB, s store.Store, k store.Key, ex store.Execution, want store.Outcome) store.Record {
	tb.Helper()
	res, err := s.Reserve(context.Background(), k, "fp", ex)
	if err != nil {
		tb.Fatalf("Reserve(%s): %v", k, err)
	}
	if res.Outcome != want {
		tb.Fatalf("Reserve(%s) = %v, want %v", k, res.Outcome, want)
	}
	return res.Record
}

func completed(id string) store.Result {
	return store.Result{ExecutionID: id, Status: store.StatusCompleted, Data: []byte(`{"ok":true}`), FinishedAt: time.Date(2026, 11, 30, 10, 0, 1, 0, time.UTC)}
}

func isUnavailable(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrCommitUnknown)
}
