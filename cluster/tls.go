package cluster

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

// nodeTLS holds the loaded material, read again when its files change.
type nodeTLS struct {
	w *tlsmux.Watched[nodeMaterial]
}

// nodeMaterial is the node's certificate and the cluster CA's pool.
type nodeMaterial struct {
	cert *tls.Certificate
	pool *x509.CertPool
}

// loadNodeTLS reads the files once; it fails when they cannot be used. A
// later reload that fails is logged to log (nil: not logged).
func loadNodeTLS(files NodeTLS, log *slog.Logger) (*nodeTLS, error) {
	w, err := tlsmux.Watch(log, files.load, files.CAFile, files.CertFile, files.KeyFile)
	if err != nil {
		return nil, err
	}
	return &nodeTLS{w: w}, nil
}

// load reads the CA and the node's pair, and checks that the pair chains
// to the CA.
func (files NodeTLS) load() (nodeMaterial, error) {
	caPEM, err := os.ReadFile(files.CAFile)
	if err != nil {
		return nodeMaterial{}, fmt.Errorf("cluster: node TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nodeMaterial{}, fmt.Errorf("cluster: node TLS CA %s: no PEM certificate", files.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		return nodeMaterial{}, fmt.Errorf("cluster: node TLS certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nodeMaterial{}, fmt.Errorf("cluster: node TLS certificate: %w", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nodeMaterial{}, fmt.Errorf("cluster: node TLS certificate %s does not chain to the CA %s: %w", files.CertFile, files.CAFile, err)
	}
	return nodeMaterial{cert: &cert, pool: pool}, nil
}

// current returns the certificate and CA pool (tlsmux.Watched reloads
// changed files; a failed reload keeps the previous material).
func (t *nodeTLS) current() (*tls.Certificate, *x509.CertPool) {
	m := t.w.Current()
	return m.cert, m.pool
}

// verifyPeer checks that a peer's certificate chains to the CA and carries
// the node role (certs.NodeRoleURI). Names are not checked: peers dial
// addresses, and the connection preamble names the server meant.
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
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return err
	}
	if !certs.HasNodeRole(leaf) {
		// A certificate of the CA made for another use (an API server's)
		// must not make its holder a node.
		err := fmt.Errorf("%w: %q (serial %s) lacks the URI SAN %s; node certificates are made by carmy tls cert (without --role api)",
			errNoNodeRole, leaf.Subject.CommonName, leaf.SerialNumber, certs.NodeRoleURI)
		// Logged where the handshake fails, with the peer's address: the
		// Raft stream's refusal log, the HTTP server's error log.
		return err
	}
	return nil
}

// errNoNodeRole is the error of a peer certificate of the cluster's CA
// that lacks the node role.
var errNoNodeRole = errors.New("cluster: the peer's certificate lacks the node role")

func (t *nodeTLS) serverConfig() *tls.Config {
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
	refusals       *refusalLog
}

func newTLSStream(inner raft.StreamLayer, t *nodeTLS, refusals *refusalLog) *tlsStream {
	return &tlsStream{StreamLayer: inner, server: t.serverConfig(), client: t.clientConfig(), refusals: refusals}
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
