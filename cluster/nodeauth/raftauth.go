package nodeauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Without node TLS, every Raft connection is authenticated by the cluster
// key with a challenge-response handshake before any Raft byte crosses
// it; the source address is never trusted. The accepting side speaks
// first:
//
//	server → dialer: "CRA1" ‖ Ns                       (Ns: 32 random bytes)
//	dialer → server: Nd ‖ HMAC-SHA256(key, labelDialer ‖ Ns ‖ Nd)
//	server → dialer: HMAC-SHA256(key, labelServer ‖ Ns ‖ Nd)
//
// The server checks the dialer's MAC (constant time) and closes the
// connection when it is wrong; the dialer checks the server's, so each
// side proves it holds the key over a nonce the other chose (nothing can
// be replayed), and the two labels keep one side's answer from serving as
// the other's (no reflection). The handshake authenticates the
// connection, not each byte after it: the stream is not encrypted, which
// is why Raft off loopback still wants node TLS (carmy serve refuses it
// without, unless --insecure).
const (
	raftAuthMagic   = "CRA1"
	raftNonceSize   = 32
	raftMACSize     = sha256.Size
	raftAuthTimeout = 5 * time.Second
	labelDialer     = "carmy raft auth v1 dialer\x00"
	labelServer     = "carmy raft auth v1 server\x00"
)

// ErrRaftAuth is the error of a Raft connection whose peer failed the
// key handshake.
var ErrRaftAuth = errors.New("cluster: raft handshake: the peer does not hold the cluster key")

func raftMAC(key []byte, label string, ns, nd []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	m.Write(ns)
	m.Write(nd)
	return m.Sum(nil)
}

// keyStream authenticates a stream layer's connections with the cluster
// key.
type keyStream struct {
	raft.StreamLayer
	key      []byte
	refusals *Refusals
}

// NewKeyStream authenticates inner's connections with the cluster key by
// the handshake above: a dialled server that does not prove it holds the
// key is hung up on, and an accepted peer that does not is closed and
// logged to refusals (nil: not logged).
func NewKeyStream(inner raft.StreamLayer, key string, refusals *Refusals) raft.StreamLayer {
	return &keyStream{StreamLayer: inner, key: []byte(key), refusals: refusals}
}

// Accept returns the next connection; its handshake runs on its first
// Read or Write (see guardedConn), so a slow or silent peer never holds up
// the accept loop.
func (s *keyStream) Accept() (net.Conn, error) {
	conn, err := s.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return newGuardedConn(conn, "raft connection without the cluster key", s.refusals, func() error {
		return s.serverHandshake(conn)
	}), nil
}

func (s *keyStream) serverHandshake(conn net.Conn) error {
	_ = conn.SetDeadline(time.Now().Add(raftAuthTimeout))
	hello := make([]byte, len(raftAuthMagic)+raftNonceSize)
	copy(hello, raftAuthMagic)
	ns := hello[len(raftAuthMagic):]
	_, _ = rand.Read(ns)
	if _, err := conn.Write(hello); err != nil {
		return fmt.Errorf("cluster: raft handshake: %w", err)
	}
	answer := make([]byte, raftNonceSize+raftMACSize)
	if _, err := io.ReadFull(conn, answer); err != nil {
		return fmt.Errorf("%w: %w", ErrRaftAuth, err)
	}
	nd, mac := answer[:raftNonceSize], answer[raftNonceSize:]
	if !hmac.Equal(mac, raftMAC(s.key, labelDialer, ns, nd)) {
		return ErrRaftAuth
	}
	if _, err := conn.Write(raftMAC(s.key, labelServer, ns, nd)); err != nil {
		return fmt.Errorf("cluster: raft handshake: %w", err)
	}
	return conn.SetDeadline(time.Time{})
}

// Dial connects and completes the handshake within timeout (and
// raftAuthTimeout); a server that does not prove it holds the key is
// hung up on.
func (s *keyStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := s.StreamLayer.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	if err := s.dialerHandshake(conn, timeout); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("cluster: raft handshake with %s: %w", address, err)
	}
	return conn, nil
}

func (s *keyStream) dialerHandshake(conn net.Conn, timeout time.Duration) error {
	if timeout <= 0 || timeout > raftAuthTimeout {
		timeout = raftAuthTimeout
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	hello := make([]byte, len(raftAuthMagic)+raftNonceSize)
	if _, err := io.ReadFull(conn, hello); err != nil {
		return err
	}
	if string(hello[:len(raftAuthMagic)]) != raftAuthMagic {
		return errors.New("the peer does not speak the carmy raft handshake (an older version?)")
	}
	ns := hello[len(raftAuthMagic):]
	nd := make([]byte, raftNonceSize)
	_, _ = rand.Read(nd)
	if _, err := conn.Write(append(nd, raftMAC(s.key, labelDialer, ns, nd)...)); err != nil {
		return err
	}
	mac := make([]byte, raftMACSize)
	if _, err := io.ReadFull(conn, mac); err != nil {
		return fmt.Errorf("the server closed the connection: a different cluster key? (%w)", err)
	}
	if !hmac.Equal(mac, raftMAC(s.key, labelServer, ns, nd)) {
		return errors.New("the server does not hold the cluster key")
	}
	return conn.SetDeadline(time.Time{})
}

// guardedConn is an accepted connection that runs a handshake before its
// first Read or Write. It runs there, in the goroutine Raft gives each
// connection, rather than in Accept: Raft's accept loop is a single
// goroutine, and a handshake in Accept would let one silent peer stall
// every other connection for the handshake's timeout. A failed handshake
// closes the connection, is logged through the rate-limited refusal log,
// and reads as io.EOF, so Raft drops the connection without a line of its
// own for every refused peer.
type guardedConn struct {
	net.Conn
	what      string
	refusals  *Refusals
	handshake func() error
	once      sync.Once
	err       error
}

func newGuardedConn(conn net.Conn, what string, refusals *Refusals, handshake func() error) *guardedConn {
	return &guardedConn{Conn: conn, what: what, refusals: refusals, handshake: handshake}
}

func (c *guardedConn) check() error {
	c.once.Do(func() {
		if err := c.handshake(); err != nil {
			_ = c.Conn.Close()
			c.refusals.Refused(c.what, c.Conn.RemoteAddr().String(), err)
			c.err = err
		}
	})
	return c.err
}

func (c *guardedConn) Read(p []byte) (int, error) {
	if c.check() != nil {
		return 0, io.EOF
	}
	return c.Conn.Read(p)
}

func (c *guardedConn) Write(p []byte) (int, error) {
	if err := c.check(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}
