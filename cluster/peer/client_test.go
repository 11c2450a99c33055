package peer

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/store"
)

// TestNothingSentBeforeTheConnection checks what a peer request reports
// as sent, which decides between "the tool did not run" and "commit
// unknown": a refused dial and a failed TLS handshake are not sent, an
// answer is.
func TestNothingSentBeforeTheConnection(t *testing.T) {
	client := NewClient(ClientConfig{TLS: testNodeTLS(t)})
	defer client.Close()

	// A server whose certificate is not of the cluster's CA (httptest's).
	stranger := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the request reached a server that failed the handshake")
	}))
	defer stranger.Close()
	sent, err := client.post(t.Context(), stranger.Listener.Addr().String(), PathJoin, fsm.NodeInfo{}, &JoinAnswer{})
	if sent || !errors.Is(err, ErrNotSent) {
		t.Errorf("failed handshake: sent %v, err %v; want not sent", sent, err)
	}

	// Nothing listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	if sent, err := client.post(t.Context(), dead, PathJoin, fsm.NodeInfo{}, &JoinAnswer{}); sent || !errors.Is(err, ErrNotSent) {
		t.Errorf("refused dial: sent %v, err %v; want not sent", sent, err)
	}

	// A plain client reaching a server that answers: sent.
	plain := NewClient(ClientConfig{})
	defer plain.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	if sent, err := plain.post(t.Context(), srv.Listener.Addr().String(), PathJoin, fsm.NodeInfo{}, &JoinAnswer{}); !sent || err == nil {
		t.Errorf("an answer: sent %v, err %v; want sent, with an error", sent, err)
	}
}

// testNodeTLS is the TLS material of a node n1 of a new CA.
func testNodeTLS(t *testing.T) *nodeauth.TLS {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	now := time.Now()
	caPEM, caKey, err := certs.NewCA("test CA", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := certs.NewNodeCert(caPEM, caKey, "n1", nil, nil, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	nt, err := nodeauth.LoadTLS(nodeauth.Files{CAFile: write("ca.pem", caPEM), CertFile: write("n1.pem", c), KeyFile: write("n1-key.pem", k)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return nt
}

// A node whose call is answered by a node of another protocol version
// (an answer naming another, or a success naming none) gets an error that
// names both, matches nodeauth.ErrProtocol and ErrRefused (nothing
// applied), and is no unknown outcome: on an ordinary call and on the
// stream's upgrade.
func TestAnswerOfAnotherProtocolIsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		version, want string
		status        int
	}{
		"another version":        {"3", "speaks node protocol 3, this node 2", http.StatusOK},
		"another version's 403":  {"3", "speaks node protocol 3, this node 2", http.StatusForbidden},
		"a success naming none":  {"", "speaks node protocol none, this node 2", http.StatusOK},
		"an upgrade naming none": {"", "speaks node protocol none, this node 2", http.StatusSwitchingProtocols},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if tc.version != "" {
				w.Header().Set(ProtocolHeader, tc.version)
			}
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(`{}`))
		}))
		addr := srv.Listener.Addr().String()
		c := NewClient(ClientConfig{NodeID: "n1"})
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, nodeauth.ErrProtocol) || !errors.Is(err, ErrRefused) || !errors.Is(err, store.ErrUnavailable) ||
				errors.Is(err, store.ErrCommitUnknown) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s, %s: %v, want nodeauth.ErrProtocol saying %q", name, what, err, tc.want)
			}
		}
		if tc.status != http.StatusSwitchingProtocols {
			_, err := c.State(t.Context(), addr)
			check("get", err)
		}
		conn, _, err := c.DialStream(t.Context(), addr)
		if err == nil {
			conn.Close()
		}
		check("stream", err)
		c.Close()
		srv.Close()
	}
}

// The upgrade asks for the stream as any peer call: with the cluster
// key, the node's id and its protocol version.
func TestStreamUpgradeNamesTheNode(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == PathStream {
			got <- r.Header.Clone()
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	c := NewClient(ClientConfig{NodeID: "follower", ClusterKey: "the-cluster-key-0123"})
	defer c.Close()
	if _, _, err := c.DialStream(t.Context(), srv.Listener.Addr().String()); err == nil {
		t.Fatal("a 404 upgraded the connection")
	}
	h := <-got
	if h.Get("Upgrade") != StreamProtocol || h.Get(NodeIDHeader) != "follower" || h.Get(KeyHeader) != "the-cluster-key-0123" ||
		h.Get(ProtocolHeader) != Protocol {
		t.Errorf("upgrade headers: %v", h)
	}
}

// Opening a stream gives up when its context ends (the forwarder
// closing), even while the leader holds the upgrade unanswered: closing a
// node does not wait on a silent leader.
func TestStreamUpgradeEndsWithItsContext(t *testing.T) {
	release := make(chan struct{})
	accepted := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		accepted <- struct{}{}
		<-release
	}))
	defer srv.Close()
	defer close(release) // before Close, which waits for the handler
	c := NewClient(ClientConfig{NodeID: "follower"})
	defer c.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, _, err := c.DialStream(ctx, srv.Listener.Addr().String())
		done <- err
	}()
	<-accepted
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotSent) {
			t.Errorf("err = %v, want ErrNotSent", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("DialStream still waits for the upgrade's answer after its context ended")
	}
}
