package cluster_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/internal/tlsmux"
	"github.com/carmyhq/carmy/store"
)

// writeTLS writes a CA and a certificate for each node id into dir and
// returns each node's files.
func writeTLS(t *testing.T, dir string, ids ...string) map[string]cluster.NodeTLS {
	t.Helper()
	now := time.Now()
	caPEM, caKey, err := certs.NewCA("test CA", time.Hour, now)
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
		c, k, err := certs.NewNodeCert(caPEM, caKey, id, nil, nil, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = cluster.NodeTLS{CAFile: ca, CertFile: write(id+".pem", c), KeyFile: write(id+"-key.pem", k)}
	}
	return out
}

// rogueTLSStream is a Raft stream layer a stranger dials with: TLS with
// the given material, or plain TCP when files is nil.
func rogueAppend(t *testing.T, target raft.ServerAddress, files *cluster.NodeTLS) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stream, err := cluster.NewTestStream(ln, files)
	if err != nil {
		t.Fatal(err)
	}
	tr := raft.NewNetworkTransportWithLogger(stream, 1, 2*time.Second, hclog.New(&hclog.LoggerOptions{Output: io.Discard}))
	defer tr.Close()
	var resp raft.AppendEntriesResponse
	// A forged entry at a term far ahead: a node that took it would
	// step down or append it.
	return tr.AppendEntries("n1", target, &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte(ln.Addr().String())},
		Term:      1 << 40, PrevLogEntry: 0, PrevLogTerm: 0,
		Entries:           []*raft.Log{{Index: 1 << 30, Term: 1 << 40, Type: raft.LogCommand, Data: []byte("forged")}},
		LeaderCommitIndex: 1 << 30,
	}, &resp)
}

// TestRaftOverMutualTLS checks that nodes with certificates of the
// cluster's CA form a cluster, and that a peer with a certificate of
// another CA, or with none, is refused at the handshake: its RPC fails and
// the leader's log and term are unchanged.
func TestRaftOverMutualTLS(t *testing.T) {
	// Not parallel: asserts the leader's term and leadership did not change.
	dir := t.TempDir()
	files := writeTLS(t, dir, "n1", "n2", "n3")
	c := newCluster(t, 3, func(cfg *cluster.Config) {
		f := files[cfg.NodeID]
		cfg.TLS = &f
		cfg.Fast = false // the term is compared: no election on a busy machine
	})
	leader := c.leader()
	mustReserve(t, leader.Store(), key("over-tls"), exec(leader.ID()), store.Reserved)
	term, last := leader.Raft().CurrentTerm(), leader.Raft().LastIndex()

	strangers := writeTLS(t, t.TempDir(), "n1") // another CA, same name
	stranger := strangers["n1"]
	for name, f := range map[string]*cluster.NodeTLS{"another CA": &stranger, "no certificate": nil} {
		err := rogueAppend(t, raft.ServerAddress(leader.RaftAddr()), f)
		t.Logf("%s: %v", name, err)
		if err == nil {
			t.Errorf("%s: the forged AppendEntries was answered", name)
		}
	}
	if got := leader.Raft().CurrentTerm(); got != term {
		t.Errorf("the leader's term moved from %d to %d", term, got)
	}
	if got := leader.Raft().LastIndex(); got < last || !leader.IsLeader() {
		t.Errorf("the leader's log or leadership changed: last index %d (was %d), leader %v", got, last, leader.IsLeader())
	}
	// The cluster still works.
	mustReserve(t, c.followers()[0].Store(), key("after-strangers"), exec("n2"), store.Reserved)
	_, err := leader.Store().Lookup(context.Background(), key("after-strangers"))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
}

// peerPost sends body to a node's peer path: over TLS as a node
// would (naming tlsmux.NodeServerName) with files' certificate, or with
// none when files is nil, or over plain HTTP when plain, naming this
// build's protocol version. It returns the status, or the error when no
// answer came.
func peerPost(t *testing.T, addr, path, body, key string, files *cluster.NodeTLS, plain bool) (int, error) {
	t.Helper()
	hc, base := peerHTTPClient(t, addr, files, plain)
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(peer.ProtocolHeader, peer.Protocol)
	if key != "" {
		req.Header.Set("Carmy-Cluster-Key", key)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// peerApply forwards cmds to a node as peerPost posts (over
// files' TLS, or plain), on a forward stream: it returns the upgrade's
// status (101: the stream opened), or the error when no answer came, or
// the first command's error (nil: applied).
func peerApply(t *testing.T, addr string, cmds []fsm.Command, key string, files *cluster.NodeTLS, plain bool) (int, error) {
	t.Helper()
	hc, base := peerHTTPClient(t, addr, files, plain)
	defer hc.CloseIdleConnections()
	var enc [][]byte
	for _, c := range cmds {
		b, err := fsm.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		enc = append(enc, b)
	}
	status, errs, err := cluster.StreamApply(hc, base, key, enc)
	if err == nil && len(errs) > 0 {
		err = errs[0]
	}
	return status, err
}

// peerHTTPClient is the client and base URL of peerPost.
func peerHTTPClient(t *testing.T, addr string, files *cluster.NodeTLS, plain bool) (*http.Client, string) {
	t.Helper()
	tc := &tls.Config{ServerName: tlsmux.NodeServerName, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13} //nolint:gosec // a stranger trusts anything
	if files != nil {
		cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	scheme := "https"
	if plain {
		scheme = "http"
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 5 * time.Second}, scheme + "://" + addr
}

// TestPeerHTTPOverMutualTLS checks the node-to-node HTTP endpoints
// under node TLS: nodes of the cluster forward and join over them, while
// a caller with a certificate of another CA, or with none, fails the
// handshake, and a plain-HTTP caller is refused even with the cluster
// key; none of them gets its reservation applied or changes the
// configuration, while the same body from a member is applied. The
// cluster key, when set too, is still checked.
func TestPeerHTTPOverMutualTLS(t *testing.T) {
	t.Parallel()
	files := writeTLS(t, t.TempDir(), "n1", "n2", "n3")
	c := newCluster(t, 3, func(cfg *cluster.Config) {
		f := files[cfg.NodeID]
		cfg.TLS, cfg.ClusterKey = &f, "s3cret-s3cret-s3cret"
		cfg.Fast = false // not about failover
	})
	leader := c.leader()
	// Forwarded over mutual TLS (n2 and n3 also joined over it).
	for _, f := range c.followers() {
		mustReserve(t, f.Store(), key("forwarded-"+f.ID()), exec(f.ID()), store.Reserved)
	}
	// A reservation of its own: had any refused caller got it applied,
	// the identity would exist.
	forged := []fsm.Command{fsm.Reserve(key("forged"), "fp", exec("intruder"))}
	// It is well formed: the same body from a member is applied (checked
	// last).
	join := `{"id":"intruder","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`
	strangers := writeTLS(t, t.TempDir(), "n1")
	stranger := strangers["n1"]
	for _, tc := range []struct {
		name  string
		files *cluster.NodeTLS
		plain bool
	}{
		{"another CA", &stranger, false},
		{"no certificate", nil, false},
		{"plain HTTP", nil, true},
	} {
		for _, p := range []struct{ path, body string }{{"/internal/v1/stream", ""}, {"/internal/v1/join", join}} {
			var status int
			var err error
			if p.body == "" {
				status, err = peerApply(t, leader.HTTPAddr(), forged, "s3cret-s3cret-s3cret", tc.files, tc.plain)
			} else {
				status, err = peerPost(t, leader.HTTPAddr(), p.path, p.body, "s3cret-s3cret-s3cret", tc.files, tc.plain)
			}
			t.Logf("%s %s: status %d, err %v", tc.name, p.path, status, err)
			switch {
			case tc.plain && status != http.StatusForbidden:
				t.Errorf("%s %s: status %d (err %v), want 403", tc.name, p.path, status, err)
			case !tc.plain && err == nil:
				t.Errorf("%s %s: answered %d, want a failed handshake", tc.name, p.path, status)
			}
		}
	}
	if _, err := leader.Store().Lookup(t.Context(), key("forged")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused caller's reservation was applied: lookup = %v", err)
	}
	if st, _ := leader.Status(t.Context()); len(st.Nodes) != 3 {
		t.Errorf("refused joins changed the configuration: %+v", st.Nodes)
	}
	// A node certificate of the cluster's CA is let through (with the
	// key, which is still checked).
	own := files["n2"]
	if status, err := peerPost(t, leader.HTTPAddr(), "/internal/v1/readindex", `{}`, "s3cret-s3cret-s3cret", &own, false); err != nil || status != http.StatusOK {
		t.Fatalf("a member's certificate: status %d, err %v", status, err)
	}
	if status, err := peerPost(t, leader.HTTPAddr(), "/internal/v1/readindex", `{}`, "wrong", &own, false); err != nil || status != http.StatusForbidden {
		t.Fatalf("a member's certificate with a wrong key: status %d (err %v), want 403", status, err)
	}
	// The same forged body, from a member, is applied: the refusals above
	// were the handshake's and the endpoint's, not the body's.
	if status, err := peerApply(t, leader.HTTPAddr(), forged, "s3cret-s3cret-s3cret", &own, false); err != nil || status != http.StatusSwitchingProtocols {
		t.Fatalf("the body from a member: status %d, err %v", status, err)
	}
	if _, err := leader.Store().Lookup(t.Context(), key("forged")); err != nil {
		t.Fatalf("the body from a member was not applied: %v", err)
	}
}
