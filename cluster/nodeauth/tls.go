package nodeauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/internal/tlsmux"
)

// Files names the files of mutual TLS between nodes: the cluster's CA
// and this node's certificate and key (PEM). Every Raft connection and
// every node-to-node HTTP call (forwarding, joins, read indexes) is then
// TLS, both ends present a certificate, and each refuses at the handshake
// a peer whose certificate does not chain to the CA, or that has none.
// The files are read again when they change (checked at most every few
// seconds), so certificates are renewed without a restart.
type Files struct {
	CAFile, CertFile, KeyFile string
}

// TLS is a node's loaded TLS material (its certificate and the cluster
// CA), read again when its files change. Safe for concurrent use.
type TLS struct {
	w *tlsmux.Watched[material]
}

// material is the node's certificate and the cluster CA's pool.
type material struct {
	cert *tls.Certificate
	pool *x509.CertPool
}

// LoadTLS reads the files once; it fails when they cannot be used (a CA
// without a certificate, a pair that does not chain to the CA). A later
// reload that fails is logged to log (nil: not logged) and keeps the
// previous material.
func LoadTLS(files Files, log *slog.Logger) (*TLS, error) {
	w, err := tlsmux.Watch(log, files.load, files.CAFile, files.CertFile, files.KeyFile)
	if err != nil {
		return nil, err
	}
	return &TLS{w: w}, nil
}

// load reads the CA and the node's pair, and checks that the pair chains
// to the CA.
func (files Files) load() (material, error) {
	caPEM, err := os.ReadFile(files.CAFile)
	if err != nil {
		return material{}, fmt.Errorf("cluster: node TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return material{}, fmt.Errorf("cluster: node TLS CA %s: no PEM certificate", files.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		return material{}, fmt.Errorf("cluster: node TLS certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return material{}, fmt.Errorf("cluster: node TLS certificate: %w", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return material{}, fmt.Errorf("cluster: node TLS certificate %s does not chain to the CA %s: %w", files.CertFile, files.CAFile, err)
	}
	return material{cert: &cert, pool: pool}, nil
}

// current returns the certificate and CA pool (tlsmux.Watched reloads
// changed files; a failed reload keeps the previous material).
func (t *TLS) current() (*tls.Certificate, *x509.CertPool) {
	m := t.w.Current()
	return m.cert, m.pool
}

// verifyPeer checks that a peer's certificate chains to the CA and carries
// the node role (certs.NodeRoleURI). Names are not checked: peers dial
// addresses, and the connection preamble names the server meant.
func (t *TLS) verifyPeer(rawCerts [][]byte, usage x509.ExtKeyUsage) error {
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
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return err
	}
	if !certs.HasNodeRole(leaf) {
		// A certificate of the CA made for another use (an API server's)
		// must not make its holder a node.
		err := fmt.Errorf("%w: %q (serial %s) lacks the URI SAN %s; node certificates are made by carmy tls cert (without --role api)",
			ErrNoNodeRole, leaf.Subject.CommonName, leaf.SerialNumber, certs.NodeRoleURI)
		// Logged where the handshake fails, with the peer's address: the
		// Raft stream's refusal log, the HTTP server's error log.
		return err
	}
	return nil
}

// ErrNoNodeRole is the error of a peer certificate of the cluster's CA
// that lacks the node role.
var ErrNoNodeRole = errors.New("cluster: the peer's certificate lacks the node role")

// ServerConfig is the configuration of a node's end that accepts: TLS
// 1.3, its certificate, and a client certificate required, chained to the
// CA and carrying the node role (checked on every handshake; no session
// tickets).
func (t *TLS) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, _ := t.current()
			return c, nil
		},
		// The chain is checked by VerifyPeerCertificate against the
		// current CA, which may have been reloaded. Go skips that check
		// on a resumed session, so there is none: a ticket issued under
		// a CA since replaced would let its holder in without it. Nodes
		// keep no session cache, so they lose nothing.
		ClientAuth:             tls.RequireAnyClientCert,
		SessionTicketsDisabled: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return t.verifyPeer(raw, x509.ExtKeyUsageClientAuth)
		},
	}
}

// ClientConfig is the configuration of a node's end that dials: TLS 1.3,
// its certificate, and a server certificate chained to the CA and carrying
// the node role (names are not checked: peers dial addresses, and the
// Raft preamble names the server meant).
func (t *TLS) ClientConfig() *tls.Config {
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
	refusals       *Refusals
}

// NewTLSStream runs inner's connections over mutual TLS with t: both ends
// present a node certificate of the CA, and an accepted connection whose
// peer does not is closed at its handshake and logged to refusals (nil:
// not logged).
func NewTLSStream(inner raft.StreamLayer, t *TLS, refusals *Refusals) raft.StreamLayer {
	return &tlsStream{StreamLayer: inner, server: t.ServerConfig(), client: t.ClientConfig(), refusals: refusals}
}

// Accept returns the next connection as a TLS server connection; its
// handshake happens on the first Read or Write (guardedConn: never in the
// accept loop), within raftAuthTimeout, so a peer without a valid node
// certificate fails there and is closed, and is logged in the refusal
// log.
func (s *tlsStream) Accept() (net.Conn, error) {
	conn, err := s.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	tc := tls.Server(conn, s.server)
	return newGuardedConn(tc, "raft connection without a node certificate of the cluster CA", s.refusals, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), raftAuthTimeout)
		defer cancel()
		return tc.HandshakeContext(ctx)
	}), nil
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
