package nodeauth

import (
	"crypto/tls"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/certs"
)

// testNodeTLS returns node TLS material of a fresh CA for node n1.
func testNodeTLS(t *testing.T) *TLS {
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
	nt, err := LoadTLS(Files{CAFile: write("ca.pem", caPEM), CertFile: write("n1.pem", c), KeyFile: write("n1-key.pem", k)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return nt
}

// TestNodeSessionsAreNotResumed: the node server's check of a peer's
// chain runs only on a full handshake, so it issues no session tickets;
// a client that keeps a session cache gets a full handshake every time.
func TestNodeSessionsAreNotResumed(t *testing.T) {
	nt := testNodeTLS(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", nt.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("x")) // after the handshake (and any ticket)
			_ = c.Close()
		}
	}()
	cfg := nt.ClientConfig()
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	for i := range 2 {
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		if c.ConnectionState().DidResume {
			t.Fatalf("connection %d resumed a session", i+1)
		}
		_ = c.Close()
	}
}
