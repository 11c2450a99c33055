package carmy

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"sync"
	"time"
)

// netHTTP431 is what net/http writes, in one Write on the connection and
// before any handler runs, to a request whose headers are past the
// server's MaxHeaderBytes (net/http's server.go: "431 Request Header
// Fields Too Large"). TestOversizedHeadersAre431 fails if a Go release
// words it otherwise.
const netHTTP431 = "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large"

// envelopeListener returns the connections of ln with net/http's own 431
// answer replaced by answer (api.OversizedHeadersAnswer): net/http has no
// hook for that answer, so every error reaches the client in the
// envelope of docs/errors.md. A *tls.Conn (from tlsmux) is wrapped too, the replacement
// happening before encryption: net/http then no longer recognises the
// connection as TLS, so the wrapper completes the handshake itself, within
// handshake, when net/http first asks for its state (ConnectionState),
// which fills Request.TLS as before. A failed handshake is logged at WARN
// as net/http logs it, and closes the connection.
func envelopeListener(ln net.Listener, answer []byte, handshake time.Duration, log *slog.Logger) net.Listener {
	return &envListener{Listener: ln, answer: answer, handshake: handshake, log: log}
}

type envListener struct {
	net.Listener
	answer    []byte
	handshake time.Duration
	log       *slog.Logger
}

// Accept returns the next connection of the inner listener, wrapped.
func (l *envListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	ec := envConn{Conn: c, answer: l.answer}
	if tc, ok := c.(*tls.Conn); ok {
		return &envTLSConn{envConn: ec, tls: tc, handshake: l.handshake, log: l.log}, nil
	}
	return &ec, nil
}

// envConn replaces net/http's 431 answer with its own.
type envConn struct {
	net.Conn
	answer []byte
}

// Write writes p, or answer in its place when p is net/http's plain 431
// answer. It reports len(p) written when answer was written in full.
func (c *envConn) Write(p []byte) (int, error) {
	if len(p) == len(netHTTP431) && string(p) == netHTTP431 {
		if _, err := c.Conn.Write(c.answer); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// CloseWrite half-closes the connection, as net/http does after its 431
// so that the client reads the answer before the connection closes.
func (c *envConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// envTLSConn is an envConn over a *tls.Conn.
type envTLSConn struct {
	envConn
	tls       *tls.Conn
	handshake time.Duration

	log  *slog.Logger
	once sync.Once
}

// ConnectionState completes the handshake (once, within the handshake
// timeout) and returns the connection's TLS state. net/http calls it when
// it takes the connection, before reading a request: it is what makes
// Request.TLS.
func (c *envTLSConn) ConnectionState() tls.ConnectionState {
	c.once.Do(func() {
		ctx := context.Background()
		if c.handshake > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, c.handshake)
			defer cancel()
		}
		if err := c.tls.HandshakeContext(ctx); err != nil {
			c.log.Warn("http: TLS handshake error", slog.String("remote_addr", c.RemoteAddr().String()), slog.Any("err", err))
			_ = c.tls.Close()
		}
	})
	return c.tls.ConnectionState()
}
