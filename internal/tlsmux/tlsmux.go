// Package tlsmux serves TLS and plain connections on one listener. A
// connection whose first byte opens a TLS handshake is returned as a
// *tls.Conn (so net/http completes the handshake and fills Request.TLS);
// any other connection is returned as it came. The HTTP API and the
// node-to-node endpoints share a port this way: nodes reach each other over
// mutual TLS by naming NodeServerName in their handshake, while clients use
// HTTPS (or plain HTTP when the API has no certificate).
package tlsmux

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"
)

// NodeServerName is the server name (SNI) a node sends when it dials
// another node's HTTP address: the server then answers with the node
// certificate and asks for the caller's. It is not a DNS name anyone
// resolves.
const NodeServerName = "node.carmy.internal"

// recordTypeHandshake is the first byte of every TLS connection.
const recordTypeHandshake = 0x16

// DefaultSniffTimeout bounds the wait for a new connection's first byte.
const DefaultSniffTimeout = 10 * time.Second

// Listener classifies the connections of an inner listener.
type Listener struct {
	inner   net.Listener
	cfg     *tls.Config
	timeout time.Duration

	conns chan net.Conn
	errc  chan error
	done  chan struct{}
	once  sync.Once
}

// New returns a listener over inner: connections that open with a TLS
// handshake are served with cfg; others pass through as they are. A
// connection that sends nothing within timeout (DefaultSniffTimeout when
// 0) is closed, and never holds up the connections behind it.
func New(inner net.Listener, cfg *tls.Config, timeout time.Duration) *Listener {
	if timeout <= 0 {
		timeout = DefaultSniffTimeout
	}
	l := &Listener{inner: inner, cfg: cfg, timeout: timeout, conns: make(chan net.Conn), errc: make(chan error, 1), done: make(chan struct{})}
	go l.acceptLoop()
	return l
}

// acceptLoop hands the inner listener's connections to sniff, and its
// errors to Accept. It goes on after an error other than the listener's
// closing (too many open files, an aborted connection): the server
// backs off on such errors and calls Accept again, so the next send
// waits for it.
func (l *Listener) acceptLoop() {
	for {
		c, err := l.inner.Accept()
		if err != nil {
			select {
			case l.errc <- err:
			case <-l.done:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		go l.sniff(c)
	}
}

// sniff reads the first byte and hands the connection to Accept.
func (l *Listener) sniff(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(l.timeout))
	br := bufio.NewReaderSize(c, 1)
	first, err := br.Peek(1)
	if err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	var out net.Conn = &peekedConn{Conn: c, r: br}
	if first[0] == recordTypeHandshake && l.cfg != nil {
		out = tls.Server(out, l.cfg)
	}
	select {
	case l.conns <- out:
	case <-l.done:
		_ = c.Close()
	}
}

// Accept returns the next classified connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errc:
		return nil, err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the inner listener; connections being classified are
// closed.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.inner.Close()
}

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// peekedConn reads the byte peeked at before the rest of the connection.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

// CloseWrite half-closes a TCP connection, as net/http does after an
// error answer so that the client reads it before the connection closes.
func (c *peekedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p)
		}
		c.r = nil
	}
	return c.Conn.Read(p)
}
