package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// NodeTLS names the files of mutual TLS between nodes: the cluster's CA
// and this node's certificate and key (PEM). Every Raft connection and
// every node-to-node HTTP call (forwarding, joins, read indexes) is then
// TLS, both ends present a certificate, and each refuses at the handshake
// a peer whose certificate does not chain to the CA, or that has none.
// The files are read again when they change (checked at most every few
// seconds), so certificates are renewed without a restart.
type NodeTLS struct {
	CAFile, CertFile, KeyFile string
}

// tlsReloadEvery is how often the files are checked for changes.
const tlsReloadEvery = 5 * time.Second

// nodeTLS holds the loaded material and reloads it.
type nodeTLS struct {
	files NodeTLS

	mu       sync.Mutex
	checked  time.Time
	modTimes [3]time.Time
	cert     *tls.Certificate
	pool     *x509.CertPool
}

// loadNodeTLS reads the files once; it fails when they cannot be used.
func loadNodeTLS(files NodeTLS) (*nodeTLS, error) {
	t := &nodeTLS{files: files}
	if err := t.reload(true); err != nil {
		return nil, err
	}
	return t, nil
}

// reload reads the files again if any changed (or if force).
func (t *nodeTLS) reload(force bool) error {
	var mods [3]time.Time
	for i, f := range []string{t.files.CAFile, t.files.CertFile, t.files.KeyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return fmt.Errorf("cluster: node TLS: %w", err)
		}
		mods[i] = st.ModTime()
	}
	if !force && mods == t.modTimes {
		return nil
	}
	caPEM, err := os.ReadFile(t.files.CAFile)
	if err != nil {
		return fmt.Errorf("cluster: node TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("cluster: node TLS CA %s: no PEM certificate", t.files.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(t.files.CertFile, t.files.KeyFile)
	if err != nil {
		return fmt.Errorf("cluster: node TLS certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("cluster: node TLS certificate: %w", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return fmt.Errorf("cluster: node TLS certificate %s does not chain to the CA %s: %w", t.files.CertFile, t.files.CAFile, err)
	}
	t.cert, t.pool, t.modTimes = &cert, pool, mods
	return nil
}

// current returns the certificate and CA pool, reloading changed files at
// most every tlsReloadEvery. A failed reload keeps the previous material.
func (t *nodeTLS) current() (*tls.Certificate, *x509.CertPool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.checked) >= tlsReloadEvery {
		t.checked = time.Now()
		_ = t.reload(false)
	}
	return t.cert, t.pool
}

// verifyPeer checks that a peer's certificate chains to the CA. Names are
// not checked: peers dial addresses, and the connection preamble names
// the server meant.
func (t *nodeTLS) verifyPeer(rawCerts [][]byte, usage x509.ExtKeyUsage) error {
	if len(rawCerts) == 0 {
		return errors.New("cluster: the peer presented no certificate")
	}
	_, pool := t.current()
	leaf, err := x509.ParseCertificate(rawCerts[0])
	if err != nil {
		return err
	}
	inter := x509.NewCertPool()
	for _, raw := range rawCerts[1:] {
		if c, err := x509.ParseCertificate(raw); err == nil {
			inter.AddCert(c)
		}
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

func (t *nodeTLS) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, _ := t.current()
			return c, nil
		},
		// The chain is checked by VerifyPeerCertificate against the
		// current CA, which may have been reloaded.
		ClientAuth: tls.RequireAnyClientCert,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return t.verifyPeer(raw, x509.ExtKeyUsageClientAuth)
		},
	}
}

func (t *nodeTLS) clientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, _ := t.current()
			return c, nil
		},
		// Verified by VerifyPeerCertificate: the chain to the cluster CA.
		InsecureSkipVerify: true, //nolint:gosec // the chain is verified below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return t.verifyPeer(raw, x509.ExtKeyUsageServerAuth)
		},
	}
}

// tlsStream runs a Raft stream layer's connections over mutual TLS.
type tlsStream struct {
	raft.StreamLayer
	server, client *tls.Config
}

func newTLSStream(inner raft.StreamLayer, t *nodeTLS) *tlsStream {
	return &tlsStream{StreamLayer: inner, server: t.serverConfig(), client: t.clientConfig()}
}

// Accept returns the next connection as a TLS server connection; its
// handshake happens on the first read, so a peer without a valid
// certificate fails there and is closed.
func (s *tlsStream) Accept() (net.Conn, error) {
	conn, err := s.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return tls.Server(conn, s.server), nil
}

// Dial connects and completes the TLS handshake within timeout.
func (s *tlsStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := s.StreamLayer.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(conn, s.client)
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("cluster: raft TLS handshake with %s: %w", address, err)
	}
	return tc, nil
}

// ServerTLSConfig is the TLS configuration the node's HTTP listener serves
// to other nodes (those naming tlsmux.NodeServerName): the node's
// certificate, TLS 1.3, and a client certificate required and checked
// against the cluster CA. It is nil without node TLS.
func (n *Node) ServerTLSConfig() *tls.Config {
	if n.tls == nil {
		return nil
	}
	c := n.tls.serverConfig()
	c.NextProtos = []string{"http/1.1"}
	return c
}
