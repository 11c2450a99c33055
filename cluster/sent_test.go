package cluster

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/cluster/wire"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/internal/certs"
)

// TestNothingSentBeforeTheConnection checks what a node-to-node request
// reports as sent, which decides between "the tool did not run" and
// "commit unknown": a refused dial and a failed TLS handshake are not sent,
// an answer is.
func TestNothingSentBeforeTheConnection(t *testing.T) {
	nt := testNodeTLS(t)
	client := newInternalClient(Config{}, nt)
	defer client.close()

	// A server whose certificate is not of the cluster's CA (httptest's).
	stranger := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the request reached a server that failed the handshake")
	}))
	defer stranger.Close()
	sent, err := client.post(t.Context(), stranger.Listener.Addr().String(), pathJoin, fsm.NodeInfo{}, &joinAnswer{})
	if sent || !errors.Is(err, wire.ErrNotSent) {
		t.Errorf("failed handshake: sent %v, err %v; want not sent", sent, err)
	}

	// Nothing listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	if sent, err := client.post(t.Context(), dead, pathJoin, fsm.NodeInfo{}, &joinAnswer{}); sent || !errors.Is(err, wire.ErrNotSent) {
		t.Errorf("refused dial: sent %v, err %v; want not sent", sent, err)
	}

	// A plain client reaching a server that answers: sent.
	plain := newInternalClient(Config{}, nil)
	defer plain.close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	if sent, err := plain.post(t.Context(), srv.Listener.Addr().String(), pathJoin, fsm.NodeInfo{}, &joinAnswer{}); !sent || err == nil {
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
	nt, err := nodeauth.LoadTLS(NodeTLS{CAFile: write("ca.pem", caPEM), CertFile: write("n1.pem", c), KeyFile: write("n1-key.pem", k)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return nt
}
