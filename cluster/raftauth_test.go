package cluster_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/store"
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
// refused by Raft and by the internal endpoints: its forged AppendEntries
// is not answered, and its forged reservation is not applied.
func TestNodeTLSRefusesCertificateWithoutNodeRole(t *testing.T) {
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
	cmd, err := json.Marshal(fsm.Reserve(key("forged-by-api-cert"), "fp", exec("intruder")))
	if err != nil {
		t.Fatal(err)
	}
	status, err := internalPost(t, n.HTTPAddr(), "/internal/v1/apply", `{"commands":[`+string(cmd)+`]}`, "", &api, false)
	t.Logf("internal: status %d, err %v", status, err)
	if err == nil && status != http.StatusForbidden {
		t.Errorf("the internal API answered %d to a certificate without the node role", status)
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
	waitFor(t, "the node with the same key to be seen", 10*time.Second, func() bool {
		return slices.Contains(a.GossipMembers(), "friend")
	})
	if slices.Contains(a.GossipMembers(), b.ID()) || len(b.GossipMembers()) > 1 {
		t.Errorf("nodes with different cluster keys see each other: %v and %v", a.GossipMembers(), b.GossipMembers())
	}
}
