package egress

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// Whether a request reached its upstream decides what Carmy records when
// no answer came back (docs/guarantees.md): a request of which not one byte was
// written cannot have had an effect, and its reservation is released; one
// that was written, even in part, may have, and its execution becomes
// interrupted. That is decided here, at the transport, by counting the
// bytes written to each connection — never from an error's text.

// countingConn counts the bytes written to a connection.
//
// A write is counted before it starts and corrected when it returns short:
// an answer can arrive, and be noted by the request's trace on another
// goroutine, before the Write that carried the request returns, so a count
// taken after the write would miss bytes the answer already answered, and
// a redirect's rewind would then be refused as a re-send.
//
// It also tells the requests given it that asked (TrackSendNotify) when a
// write of theirs has put a byte on the wire: the requests it was given
// since its last write that put one.
type countingConn struct {
	net.Conn
	written atomic.Int64
	// waiting is how many requests wait in watchers for a byte written:
	// a write reads it, and takes mu only when it is not zero.
	waiting  atomic.Int32
	mu       sync.Mutex
	watchers []*Send
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.written.Add(int64(len(p)))
	n, err := c.Conn.Write(p)
	if n < len(p) {
		c.written.Add(int64(n - len(p)))
	}
	if n > 0 && c.waiting.Load() > 0 {
		c.wrote()
	}
	return n, err
}

// watch has s told of the next write that puts a byte on the wire.
func (c *countingConn) watch(s *Send) {
	c.mu.Lock()
	c.watchers = append(c.watchers, s)
	c.waiting.Store(int32(len(c.watchers)))
	c.mu.Unlock()
}

// wrote tells the watchers that a byte was written.
func (c *countingConn) wrote() {
	c.mu.Lock()
	ws := c.watchers
	c.watchers = nil
	c.waiting.Store(0)
	c.mu.Unlock()
	for _, s := range ws {
		s.notify()
	}
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
	// answered is how many of conns were given before the last answer
	// (a response's first byte) arrived: writes to them up to their
	// base were made before it.
	answered int
	// onSent, when not nil, is called once when Sent first turns true
	// (TrackSendNotify); notified says it was.
	onSent   func()
	notified atomic.Bool
}

type tracked struct {
	c     *countingConn // nil: a connection that does not count
	start int64         // its count when the request got it
	base  int64         // its count when the last answer arrived
}

// TrackSend returns ctx with a trace that notes every connection a request
// made with it is given by an *http.Transport, and the Send that reads
// them. Use ctx for exactly one request (and its redirects).
func TrackSend(ctx context.Context) (context.Context, *Send) {
	return TrackSendNotify(ctx, nil)
}

// TrackSendNotify is TrackSend, and calls onSent (when not nil) once, as
// soon as a byte of the request may have been written — when Sent would
// first answer true: the write that put a byte on a counting connection
// has returned, or the request was given a connection that does not
// count. onSent may run on the transport's goroutines and must not block.
func TrackSendNotify(ctx context.Context, onSent func()) (context.Context, *Send) {
	s := &Send{onSent: onSent}
	trace := &httptrace.ClientTrace{
		GotConn:              func(info httptrace.GotConnInfo) { s.got(info.Conn) },
		GotFirstResponseByte: s.answer,
	}
	return httptrace.WithClientTrace(ctx, trace), s
}

// answer notes that an answer began to arrive: what was written before it
// was answered, and a later rewind of the body (a redirect) repeats
// nothing unanswered.
func (s *Send) answer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answered = len(s.conns)
	for i := range s.conns {
		if c := s.conns[i].c; c != nil {
			s.conns[i].base = c.written.Load()
		}
	}
}

// unanswered reports whether a byte may have been written for the request
// since the last answer arrived (or since it began, if none did).
func (s *Send) unanswered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, t := range s.conns {
		switch {
		case i < s.answered && (t.c == nil || t.c.written.Load() == t.base):
			// Given before the answer, and not written to since.
		case t.c == nil:
			return true
		case i < s.answered:
			return true
		case t.c.written.Load() > t.start:
			return true
		}
	}
	return false
}

// ErrNoResend is the error of a request that net/http's Transport wanted
// to send again after it had written it, in part or whole, and had no
// answer: sending it again could repeat its effect, so it was not.
var ErrNoResend = errors.New("the request was written and not answered; it is not sent again")

// GuardResend keeps req, made with the context of TrackSend, from being
// sent a second time by an *http.Transport.
//
// A Transport sends a request again on a new connection when the kept-alive
// connection it used was closed with no answer, if the request is
// "replayable": a GET, HEAD, OPTIONS or TRACE, or any request carrying an
// Idempotency-Key header — as every call Carmy makes does — whose body it
// can rewind (GetBody). For a call that must run at most once, an upstream
// that did the work and then lost the connection would then run it twice.
// GuardResend wraps req.GetBody so that a rewind fails with ErrNoResend
// when a byte of the request was written since it began or since the last
// answer arrived; a rewind before anything was written (the Transport
// retrying a connection that failed first) and one after an answer (a
// redirect) work as before. A request without a body is left as it is,
// since the Transport does not rewind it; callers send calls with a body.
func (s *Send) GuardResend(req *http.Request) {
	get := req.GetBody
	if get == nil {
		return
	}
	req.GetBody = func() (io.ReadCloser, error) {
		if s.unanswered() {
			return nil, ErrNoResend
		}
		return get()
	}
}

func (s *Send) got(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	t := tracked{}
	cc, counts := c.(*countingConn)
	if counts {
		t.c, t.start = cc, cc.written.Load()
	}
	s.mu.Lock()
	s.conns = append(s.conns, t)
	s.mu.Unlock()
	switch {
	case s.onSent == nil:
	case counts:
		cc.watch(s)
	default:
		s.notify() // reads as sent (Sent)
	}
}

// notify calls onSent, the first time only.
func (s *Send) notify() {
	if s.onSent != nil && s.notified.CompareAndSwap(false, true) {
		s.onSent()
	}
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
