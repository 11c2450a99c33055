package tlsmux_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/internal/tlsmux"
)

// pki is a CA with a server certificate for the API and one for a node.
type pki struct {
	pool            *x509.CertPool
	api, node       tls.Certificate
	apiCert, apiKey string // files
	caPEM, caKey    []byte
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	now := time.Now()
	caPEM, caKey, err := certs.NewCA("test CA", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{pool: x509.NewCertPool(), caPEM: caPEM, caKey: caKey}
	p.pool.AppendCertsFromPEM(caPEM)
	mk := func(id string) (tls.Certificate, []byte, []byte) {
		c, k, err := certs.NewNodeCert(caPEM, caKey, id, nil, nil, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return pair, c, k
	}
	var c, k []byte
	p.api, c, k = mk("api")
	dir := t.TempDir()
	p.apiCert, p.apiKey = filepath.Join(dir, "api.pem"), filepath.Join(dir, "api-key.pem")
	if err := os.WriteFile(p.apiCert, c, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.apiKey, k, 0o600); err != nil {
		t.Fatal(err)
	}
	p.node, _, _ = mk("n1")
	return p
}

// serve runs an HTTP server on a tlsmux listener that answers which
// server name and scheme a request came with.
func serve(t *testing.T, client, node *tls.Config, timeout time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := tlsmux.New(ln, tlsmux.Config(client, node), timeout)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			_, _ = io.WriteString(w, "plain")
			return
		}
		_, _ = io.WriteString(w, "tls:"+r.TLS.ServerName)
	})}
	go srv.Serve(mux)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func get(t *testing.T, url string, tc *tls.Config) (string, error) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestOnePortServesPlainAPIAndNodeTLS checks the classification: plain
// HTTP passes through, a handshake naming NodeServerName gets the node
// configuration, and any other handshake gets the API's.
func TestOnePortServesPlainAPIAndNodeTLS(t *testing.T) {
	p := newPKI(t)
	kp, err := tlsmux.LoadKeyPair(p.apiCert, p.apiKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodeCfg := &tls.Config{Certificates: []tls.Certificate{p.node}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.pool, MinVersion: tls.VersionTLS13}
	addr := serve(t, kp.ServerConfig(), nodeCfg, 0)

	if got, err := get(t, "http://"+addr, nil); err != nil || got != "plain" {
		t.Fatalf("plain HTTP: %q, %v", got, err)
	}
	if got, err := get(t, "https://"+addr, &tls.Config{RootCAs: p.pool, ServerName: "api"}); err != nil || got != "tls:api" {
		t.Fatalf("HTTPS to the API: %q, %v", got, err)
	}
	nodeClient := &tls.Config{RootCAs: p.pool, ServerName: tlsmux.NodeServerName, Certificates: []tls.Certificate{p.node}, InsecureSkipVerify: true} //nolint:gosec // names are not checked between nodes
	if got, err := get(t, "https://"+addr, nodeClient); err != nil || got != "tls:"+tlsmux.NodeServerName {
		t.Fatalf("a node: %q, %v", got, err)
	}
	// The node configuration asks for a certificate: none fails.
	noCert := &tls.Config{ServerName: tlsmux.NodeServerName, InsecureSkipVerify: true} //nolint:gosec // the test is of the server's check
	if got, err := get(t, "https://"+addr, noCert); err == nil {
		t.Fatalf("a node without a certificate was answered %q", got)
	}
}

// TestTLSWithoutAPICertificateFails checks that a TLS client of an address
// whose API is plain HTTP fails its handshake, while plain HTTP works.
func TestTLSWithoutAPICertificateFails(t *testing.T) {
	p := newPKI(t)
	nodeCfg := &tls.Config{Certificates: []tls.Certificate{p.node}, MinVersion: tls.VersionTLS13}
	addr := serve(t, nil, nodeCfg, 0)
	if _, err := get(t, "https://"+addr, &tls.Config{RootCAs: p.pool, ServerName: "api"}); err == nil {
		t.Fatal("an HTTPS client of a plain API was answered")
	}
	if got, err := get(t, "http://"+addr, nil); err != nil || got != "plain" {
		t.Fatalf("plain HTTP: %q, %v", got, err)
	}
}

// TestSilentConnectionsDoNotBlockOthers checks that a connection that
// sends nothing is closed after the timeout and does not hold up the
// connections after it.
func TestSilentConnectionsDoNotBlockOthers(t *testing.T) {
	addr := serve(t, nil, nil, 300*time.Millisecond)
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if got, err := get(t, "http://"+addr, nil); err != nil || got != "plain" {
		t.Fatalf("plain HTTP behind a silent connection: %q, %v", got, err)
	}
	_ = silent.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the silent connection was not closed by the server: %v", err)
	}
}

// failOnce is a listener whose first Accept fails as it does when the
// process is out of file descriptors.
type failOnce struct {
	net.Listener
	failed atomic.Bool
}

func (l *failOnce) Accept() (net.Conn, error) {
	if !l.failed.Swap(true) {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestServesOnAfterATemporaryAcceptError: an accept error other than the
// listener's closing is the server's to back off from; connections after
// it are still served, and Close still ends the server.
func TestServesOnAfterATemporaryAcceptError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &failOnce{Listener: ln}
	srv := &http.Server{
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "served") }),
		ErrorLog: log.New(io.Discard, "", 0), // "Accept error: … retrying"
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(tlsmux.New(fl, nil, 0)) }()
	got, err := get(t, "http://"+ln.Addr().String()+"/", nil)
	if err != nil || got != "served" {
		t.Fatalf("GET after an accept error: %q, %v", got, err)
	}
	if !fl.failed.Load() {
		t.Fatal("the listener never failed")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if !errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("Serve after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after Close")
	}
}
