package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The calls of `carmy bench` go over a small HTTP/1.1 client of its own
// rather than net/http's Transport: each client goroutine keeps one
// connection per target and makes one request at a time on it, a request
// being one Write and its answer read on the same goroutine. net/http's
// Transport hands every request to a writing and a reading goroutine of the
// connection and back, and allocates its header maps: on a machine where
// the load generator shares the cores with the nodes, that was near half
// of the CPU a replay run used, and it is the nodes the run measures.
//
// What it speaks is the subset the API answers with: a status line,
// headers, and a body of a Content-Length, chunked, or up to the
// connection's close. A call on a connection that was kept alive and
// that ends, or is reset, before any byte of an answer (the node closed
// it while it was idle) is made once more on a new connection: net/http's
// Transport sees such a close while the connection idles and does not use
// it. Any other failure is the call's: a call is never retried once an
// answer began.

// benchRequestTarget is where and how a target's calls are sent.
type benchRequestTarget struct {
	addr string      // host:port to dial
	tls  *tls.Config // nil: plain HTTP
	// head is the request up to its Content-Length value: request line,
	// Host and the run's headers.
	head []byte
}

// newBenchRequestTarget returns how to send calls to callURL (http:// or
// https://) with header, a request line's and headers' worth of trusted
// bytes (the flags' values: no CR or LF).
func newBenchRequestTarget(callURL string, header [][2]string, tc *tls.Config) (benchRequestTarget, error) {
	u, err := url.Parse(callURL)
	if err != nil {
		return benchRequestTarget{}, fmt.Errorf("--targets: %w", err)
	}
	t := benchRequestTarget{addr: u.Host}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
		t.tls = tc
		if t.tls == nil {
			t.tls = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		t.tls = t.tls.Clone()
		t.tls.ServerName = u.Hostname()
		t.tls.NextProtos = []string{"http/1.1"}
	}
	if u.Port() == "" {
		t.addr = net.JoinHostPort(u.Hostname(), port)
	}
	var h []byte
	h = append(h, "POST "...)
	h = append(h, u.RequestURI()...)
	h = append(h, " HTTP/1.1\r\nHost: "...)
	h = append(h, u.Host...)
	h = append(h, "\r\n"...)
	for _, kv := range header {
		if strings.ContainsAny(kv[0]+kv[1], "\r\n") {
			return benchRequestTarget{}, fmt.Errorf("header %s: a value may not hold a line break", kv[0])
		}
		h = append(h, kv[0]...)
		h = append(h, ": "...)
		h = append(h, kv[1]...)
		h = append(h, "\r\n"...)
	}
	t.head = append(h, "Content-Length: "...)
	return t, nil
}

// benchConn is one connection to a target, kept alive between calls.
type benchConn struct {
	nc  net.Conn
	br  *bufio.Reader
	ctx context.Context // the context whose end aborts the connection's call
	// stop unregisters the abort on ctx's end.
	stop func() bool
	used bool // a call was answered on it: it was kept alive
}

// close closes the connection.
func (c *benchConn) close() {
	c.stop()
	_ = c.nc.Close()
}

// benchLane is what one goroutine of a client needs to make a call: its
// connection to each target, and its buffers.
type benchLane struct {
	conns []*benchConn // by target, nil until dialled
	req   []byte       // the request being written
	buf   []byte       // the answer's body, reused from call to call
}

// closeAll closes the lane's connections.
func (l *benchLane) closeAll() {
	for i, c := range l.conns {
		if c != nil {
			c.close()
			l.conns[i] = nil
		}
	}
}

// benchAnswer is what a call came back as.
type benchAnswer struct {
	status   int
	replayed bool // Idempotent-Replayed: true
	body     []byte
}

// errAnswerCut is a connection that ended before the answer did.
var errAnswerCut = errors.New("the connection closed before the answer was complete")

// errNoAnswer is a connection that ended, or was reset, before any byte of
// an answer. It is an errAnswerCut.
var errNoAnswer = fmt.Errorf("%w: nothing of it came", errAnswerCut)

// roundTrip sends body to target ti (t) on the lane's connection to it,
// dialled when there is none, and reads the answer within timeout. The
// answer's body is in the lane's buffer, read up to maxAnswerRead bytes
// (the rest is dropped with the connection). A connection whose answer
// failed, was cut or said Connection: close is closed.
func (d *benchDriver) roundTrip(ctx context.Context, l *benchLane, ti int, t *benchRequestTarget, body []byte, timeout time.Duration) (benchAnswer, error) {
	l.req = append(l.req[:0], t.head...)
	l.req = strconv.AppendInt(l.req, int64(len(body)), 10)
	l.req = append(l.req, "\r\n\r\n"...)
	l.req = append(l.req, body...)
	deadline := time.Now().Add(timeout)
	for attempt := 0; ; attempt++ {
		c := l.conns[ti]
		if c != nil && c.ctx != ctx {
			c.close()
			c = nil
		}
		if c == nil {
			var err error
			if c, err = dialBench(ctx, t, deadline); err != nil {
				return benchAnswer{}, err
			}
			l.conns[ti] = c
		}
		if err := c.nc.SetDeadline(deadline); err != nil {
			c.close()
			l.conns[ti] = nil
			return benchAnswer{}, err
		}
		_, err := c.nc.Write(l.req)
		var a benchAnswer
		keep := false
		if err == nil {
			a, keep, err = readBenchAnswer(c.br, l.buf[:0])
			l.buf = a.body
		} else if !isTimeout(err) {
			err = fmt.Errorf("%w (%w)", errNoAnswer, err)
		}
		if err == nil && keep {
			c.used = true
			return a, nil
		}
		c.close()
		l.conns[ti] = nil
		if err != nil && errors.Is(err, errNoAnswer) && c.used && attempt == 0 && ctx.Err() == nil {
			continue // the node closed the idle connection: once more on a new one
		}
		return a, err
	}
}

// isTimeout reports whether err is a deadline's.
func isTimeout(err error) bool {
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// dialBench connects to t before deadline. The connection is aborted
// (its deadline moved to the past) when ctx ends.
func dialBench(ctx context.Context, t *benchRequestTarget, deadline time.Time) (*benchConn, error) {
	dl := &net.Dialer{Deadline: deadline, KeepAlive: 30 * time.Second}
	nc, err := dl.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	if t.tls != nil {
		tc := tls.Client(nc, t.tls)
		hctx, cancel := context.WithDeadline(ctx, deadline)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = nc.Close()
			return nil, err
		}
		nc = tc
	}
	c := &benchConn{nc: nc, br: bufio.NewReaderSize(nc, 16<<10), ctx: ctx}
	c.stop = context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	return c, nil
}

// readBenchAnswer reads one answer from br, its body appended to buf.
// keep says whether the connection may carry another request.
func readBenchAnswer(br *bufio.Reader, buf []byte) (a benchAnswer, keep bool, err error) {
	a.body = buf
	line, err := br.ReadSlice('\n')
	if err != nil {
		if len(line) == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
			return a, false, errNoAnswer
		}
		return a, false, answerErr(err)
	}
	// HTTP/1.x NNN reason
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return a, false, fmt.Errorf("malformed status line %q", bytes.TrimSpace(line))
	}
	keep = line[7] == '1'
	a.status, err = strconv.Atoi(string(line[9:12]))
	if err != nil || a.status < 100 {
		return a, false, fmt.Errorf("malformed status line %q", bytes.TrimSpace(line))
	}
	length, chunked := int64(-1), false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return a, false, answerErr(err)
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return a, false, fmt.Errorf("malformed header line %q", line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "Content-Length"):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 || (length >= 0 && n != length) {
				return a, false, fmt.Errorf("bad Content-Length %q", value)
			}
			length = n
		case asciiEqualFold(name, "Transfer-Encoding"):
			if !asciiEqualFold(value, "chunked") {
				return a, false, fmt.Errorf("unsupported Transfer-Encoding %q", value)
			}
			chunked = true
		case asciiEqualFold(name, "Connection"):
			if asciiEqualFold(value, "close") {
				keep = false
			}
		case asciiEqualFold(name, "Idempotent-Replayed"):
			a.replayed = string(value) == "true"
		}
	}
	if a.status < 200 {
		return a, false, fmt.Errorf("unexpected informational answer %d", a.status)
	}
	var r io.Reader
	switch {
	case chunked:
		r = httputil.NewChunkedReader(br)
	case length >= 0:
		r = io.LimitReader(br, length)
	default:
		r, keep = br, false // up to the close
	}
	a.body, err = readAnswer(a.body, r)
	if err != nil {
		return a, false, answerErr(err)
	}
	switch {
	case len(a.body) >= maxAnswerRead:
		keep = false // the rest is dropped with the connection
	case length >= 0 && int64(len(a.body)) < length:
		return a, false, errAnswerCut
	case chunked:
		// The trailer, up to its empty line.
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return a, false, answerErr(err)
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
	}
	return a, keep, nil
}

// answerErr is err, or errAnswerCut for an end of the connection.
func answerErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errAnswerCut
	}
	return err
}

// asciiEqualFold reports whether b is s in any ASCII case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
