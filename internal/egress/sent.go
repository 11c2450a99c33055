package egress

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// Whether a request reached its upstream decides what Carmy records when
// no answer came back (SPEC §1): a request of which not one byte was
// written cannot have had an effect, and its reservation is released; one
// that was written, even in part, may have, and its execution becomes
// interrupted. That is decided here, at the transport, by counting the
// bytes written to each connection — never from an error's text.

// countingConn counts the bytes written to a connection.
type countingConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// CountWrites returns dial with every connection it makes counting the
// bytes written to it, for TrackSend. Transport's dialer counts already.
func CountWrites(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c}, nil
	}
}

// Send tells whether any byte of one request was written to a connection.
// Make it with TrackSend; it is safe for concurrent use.
type Send struct {
	mu    sync.Mutex
	conns []tracked // every connection the request was given
}

type tracked struct {
	c     *countingConn // nil: a connection that does not count
	start int64         // its count when the request got it
}

// TrackSend returns ctx with a trace that notes every connection a request
// made with it is given by an *http.Transport, and the Send that reads
// them. Use ctx for exactly one request (and its redirects).
func TrackSend(ctx context.Context) (context.Context, *Send) {
	s := &Send{}
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { s.got(info.Conn) }}
	return httptrace.WithClientTrace(ctx, trace), s
}

func (s *Send) got(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	t := tracked{}
	if cc, ok := c.(*countingConn); ok {
		t.c, t.start = cc, cc.written.Load()
	}
	s.mu.Lock()
	s.conns = append(s.conns, t)
	s.mu.Unlock()
}

// Sent reports whether a byte may have been written for the request since
// it was given a connection: false only when it was given none (an
// *http.Transport writes a request only to a connection it got, after the
// dial and the TLS handshake), or when every connection it got counts its
// writes and none grew. A connection that does not count, or one shared
// with other requests (HTTP/2) or written to on closing (a TLS
// close_notify), reads as sent: the error is always towards "sent", which
// leaves an execution to reconcile, never towards "not sent", which could
// run a tool twice.
//
// Only a request made through an *http.Transport is traced: for any other
// RoundTripper, Sent cannot know, and callers must not ask.
func (s *Send) Sent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.conns {
		if t.c == nil || t.c.written.Load() > t.start {
			return true
		}
	}
	return false
}

// Traceable reports whether requests through rt can be traced by
// TrackSend: rt is an *http.Transport (nil is http.DefaultTransport).
func Traceable(rt http.RoundTripper) bool {
	if rt == nil {
		rt = http.DefaultTransport
	}
	_, ok := rt.(*http.Transport)
	return ok
}
