package cluster_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// forgedTerm is the term of rogueAppend's forged AppendEntries.
const forgedTerm = 1 << 40

// checkNotForged fails the test when n took the forged AppendEntries: its
// term jumped to the forged one, or the record written before is gone.
// (The last log index is not compared: a loaded machine may legitimately
// change the log meanwhile.)
func checkNotForged(t *testing.T, n *testNode, marker store.Key) {
	t.Helper()
	if got := n.Raft().CurrentTerm(); got >= forgedTerm {
		t.Errorf("the node took the forged term: %d", got)
	}
	rec, err := n.Store().Lookup(t.Context(), marker)
	if err != nil || rec.Key != marker {
		t.Errorf("the record written before the forgery: %+v, %v", rec, err)
	}
}

// TestRaftRefusesUnauthenticatedPeers checks that without node TLS a
// connection to the Raft port is authenticated by the cluster key, never
// by its source address: a forged AppendEntries sent from loopback (with
// the connection preamble a node sends) is not answered, the node's term
// does not move to the forged one, and what it held is still there. Before,
// any local process could truncate the log this way.
func TestRaftRefusesUnauthenticatedPeers(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, func(cfg *cluster.Config) {
		cfg.TLS = nil
		cfg.Fast = false // the term is compared: no election on a busy machine
	})
	n := c.nodes[0]
	marker := key("before-forgery")
	mustReserve(t, n.Store(), marker, exec(n.ID()), store.Reserved)

	err := rogueAppend(t, raft.ServerAddress(n.RaftAddr()), nil)
	t.Logf("forged AppendEntries: %v", err)
	if err == nil {
		t.Error("the forged AppendEntries was answered")
	}
	// Garbage instead of a handshake: the node closes the connection
	// (the read ends before its deadline, with no Raft answer).
	conn, err := net.Dial("tcp", n.RaftAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(bytes.Repeat([]byte("garbage!"), 32)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(conn)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("the node kept a connection that sent garbage open (read %d bytes)", len(got))
	}
	checkNotForged(t, n, marker)
	// The node still works.
	mustReserve(t, n.Store(), key("after-forgery"), exec(n.ID()), store.Reserved)
}

// writeTLSWithAPICert is writeTLS plus a certificate of the same CA
// without the node role, as one made for an API server: the files of
// "api".
func writeTLSWithAPICert(t *testing.T, dir string, ids ...string) map[string]cluster.NodeTLS {
	t.Helper()
	now := time.Now()
	caPEM, caKeyPEM, err := certs.NewCA("test CA", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca := write("ca.pem", caPEM)
	out := map[string]cluster.NodeTLS{}
	for _, id := range ids {
		c, k, err := certs.NewNodeCert(caPEM, caKeyPEM, id, nil, nil, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = cluster.NodeTLS{CAFile: ca, CertFile: write(id+".pem", c), KeyFile: write(id+"-key.pem", k)}
	}
	// An API server's certificate: signed by the same CA, server and
	// client auth (as a careless operator might make it), no node role.
	cb, _ := pem.Decode(caPEM)
	caCert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := pem.Decode(caKeyPEM)
	caKey, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: "api.example"},
		NotBefore:    now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"api.example", "localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out["api"] = cluster.NodeTLS{CAFile: ca,
		CertFile: write("api.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		KeyFile:  write("api-key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))}
	return out
}

// TestNodeTLSRefusesCertificateWithoutNodeRole checks that a certificate
// of the cluster's CA that lacks the node role (an API server's, say) is
// refused by Raft and by the peer endpoints: its forged AppendEntries
// is not answered, and its forged reservation is not applied.
func TestNodeTLSRefusesCertificateWithoutNodeRole(t *testing.T) {
	t.Parallel()
	files := writeTLSWithAPICert(t, t.TempDir(), "n1")
	c := newCluster(t, 1, func(cfg *cluster.Config) {
		f := files[cfg.NodeID]
		cfg.TLS = &f
		cfg.Fast = false
	})
	n := c.nodes[0]
	marker := key("before-api-cert")
	mustReserve(t, n.Store(), marker, exec(n.ID()), store.Reserved)
	api := files["api"]

	if err := rogueAppend(t, raft.ServerAddress(n.RaftAddr()), &api); err == nil {
		t.Error("Raft answered a peer whose certificate lacks the node role")
	} else {
		t.Logf("raft: %v", err)
	}
	status, err := peerApply(t, n.HTTPAddr(), []fsm.Command{fsm.Reserve(key("forged-by-api-cert"), "fp", exec("intruder"))}, "", &api, false)
	t.Logf("peer: status %d, err %v", status, err)
	if err == nil && status != http.StatusForbidden {
		t.Errorf("the peer endpoints answered %d to a certificate without the node role", status)
	}
	if _, err := n.Store().Lookup(t.Context(), key("forged-by-api-cert")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the reservation of a certificate without the node role was applied: lookup = %v", err)
	}
	checkNotForged(t, n, marker)
}

// TestGossipKeyDerivedFromClusterKey checks that gossip is encrypted by
// default under a key derived from the cluster key: two nodes with
// different cluster keys (and no gossip key) never see each other, while
// a node with the same key joins.
func TestGossipKeyDerivedFromClusterKey(t *testing.T) {
	t.Parallel()
	keyA, keyB := "cluster-key-A-0123456789abcdef", "cluster-key-B-0123456789abcdef"
	a := newCluster(t, 1, func(cfg *cluster.Config) { cfg.NodeID, cfg.ClusterKey, cfg.TLS, cfg.GossipKeys = "a", keyA, nil, nil }).nodes[0]
	b := newCluster(t, 1, func(cfg *cluster.Config) { cfg.NodeID, cfg.ClusterKey, cfg.TLS, cfg.GossipKeys = "b", keyB, nil, nil }).nodes[0]
	_ = b.JoinGossip([]string{gossipPort(t, a)})
	// A node with A's key joins at once: once it is seen, b has had as
	// long to join.
	friend := newCluster(t, 1, func(cfg *cluster.Config) {
		cfg.NodeID, cfg.ClusterKey, cfg.TLS, cfg.GossipKeys = "friend", keyA, nil, nil
	}).nodes[0]
	if err := friend.JoinGossip([]string{gossipPort(t, a)}); err != nil {
		t.Fatalf("a node with the same cluster key could not join gossip: %v", err)
	}
	testutil.WaitUntil(t, 10*time.Second, "the node with the same key to be seen", func() bool {
		return slices.Contains(a.GossipMembers(), "friend")
	})
	if slices.Contains(a.GossipMembers(), b.ID()) || len(b.GossipMembers()) > 1 {
		t.Errorf("nodes with different cluster keys see each other: %v and %v", a.GossipMembers(), b.GossipMembers())
	}
}

// TestRaftHandshakeNeedsTheSameKey checks the handshake from a node's side:
// a dialer with another cluster key is refused before any RPC is answered
// (and the node's term does not move), while one with the node's key gets
// its RPC answered.
func TestRaftHandshakeNeedsTheSameKey(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, func(cfg *cluster.Config) { cfg.TLS, cfg.Fast = nil, false })
	n := c.nodes[0]
	marker := key("before-wrong-key")
	mustReserve(t, n.Store(), marker, exec(n.ID()), store.Reserved)
	appendWith := func(k string) error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		tr := raft.NewNetworkTransportWithLogger(cluster.NewTestKeyStream(ln, k), 1, 5*time.Second, hclog.New(&hclog.LoggerOptions{Output: io.Discard}))
		defer tr.Close()
		var resp raft.AppendEntriesResponse
		// A heartbeat of an older term: harmless when answered (the
		// node refuses it), so only the handshake decides.
		return tr.AppendEntries(raft.ServerID(n.ID()), raft.ServerAddress(n.RaftAddr()), &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("other"), Addr: []byte(ln.Addr().String())},
			Term:      0,
		}, &resp)
	}
	if err := appendWith("another-cluster-key-0123456789"); err == nil {
		t.Error("a dialer with another cluster key got its RPC answered")
	} else {
		t.Logf("another key: %v", err)
	}
	if err := appendWith(testClusterKey); err != nil {
		t.Errorf("a dialer with the node's key: %v", err)
	}
	checkNotForged(t, n, marker)
}

// blockingCloseStream is a Raft stream layer whose Close does not return
// until release is closed: a transport that hangs on shutdown.
type blockingCloseStream struct {
	raft.StreamLayer
	release chan struct{}
}

func (s *blockingCloseStream) Close() error {
	<-s.release
	return s.StreamLayer.Close()
}

// TestCloseIsBounded checks that a node whose transport does not close
// still returns from Close, by ShutdownTimeout, with ErrShutdownTimeout.
func TestCloseIsBounded(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	n := startNode(t, "n1", t.TempDir(), true, nil, func(cfg *cluster.Config) {
		cfg.ShutdownTimeout = time.Second
		cfg.Hooks.RaftStream = func(s raft.StreamLayer) raft.StreamLayer {
			return &blockingCloseStream{StreamLayer: s, release: release}
		}
	})
	// Runs first: the shutdown left in the background then ends before
	// the data dir is removed.
	t.Cleanup(func() { close(release) })
	testutil.WaitUntil(t, 30*time.Second, "n1 to lead", func() bool { return n.IsLeader() })
	err := n.Close()
	if !errors.Is(err, cluster.ErrShutdownTimeout) {
		t.Fatalf("Close with a hung transport = %v, want ErrShutdownTimeout", err)
	}
}

// lockedBuffer is a log destination safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestPeerWritesAreAudited checks the audit line of a forwarded batch:
// one INFO line on the leader naming the caller, the batch and its
// outcome.
func TestPeerWritesAreAudited(t *testing.T) {
	t.Parallel()
	logs := map[string]*lockedBuffer{}
	var mu sync.Mutex
	c := newCluster(t, 2, func(cfg *cluster.Config) {
		b := &lockedBuffer{}
		mu.Lock()
		logs[cfg.NodeID] = b
		mu.Unlock()
		cfg.Logger = slog.New(slog.NewTextHandler(b, nil))
	})
	f := c.followers()[0]
	mustReserve(t, f.Store(), key("audited"), exec(f.ID()), store.Reserved)
	leader := c.leader()
	mu.Lock()
	b := logs[leader.ID()]
	mu.Unlock()
	var line string
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(b.String())
		}
	})
	testutil.WaitUntil(t, 10*time.Second, "the audit line", func() bool {
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.Contains(l, `msg="internal write"`) && strings.Contains(l, " op=apply ") && strings.Contains(l, "caller="+f.ID()) && strings.Contains(l, "reserve=1\"") {
				line = l
				return true
			}
		}
		return false
	})
	for _, want := range []string{"level=INFO", "remote_addr=127.0.0.1:", "commands=", "outcome=done", "ok="} {
		if !strings.Contains(line, want) {
			t.Errorf("the audit line lacks %q: %s", want, line)
		}
	}
	mu.Lock()
	first := logs["n1"] // n2 joined through n1
	mu.Unlock()
	// The join's line comes once its request is answered, which can be
	// after n2 already serves (it learns the configuration through Raft).
	testutil.WaitUntil(t, 10*time.Second, "the join's audit line on n1", func() bool {
		return strings.Contains(first.String(), " op=join ") && strings.Contains(first.String(), "target=n2")
	})
}
