package cluster_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/internal/certs"
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
	dir := t.TempDir()
	files := writeTLS(t, dir, "n1", "n2", "n3")
	c := newCluster(t, 3, func(cfg *cluster.Config) {
		f := files[cfg.NodeID]
		cfg.TLS = &f
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
