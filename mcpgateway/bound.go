package mcpgateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/egress"
)

// MinAnswerBytes is the least bound on one upstream message, whatever
// Config.MaxAnswerBytes says: a handshake and a listing must fit.
const MinAnswerBytes = 64 << 10

// errAnswerTooLarge is the error of a read past the bound on one upstream
// message. Once returned, every later read of that stream returns it too.
var errAnswerTooLarge = errors.New("the upstream's message is larger than the node's result limit")

// callState is what the gateway knows of one tools/call while it runs. It
// rides in the context of the call (withCall), so that the transport
// reading the answer can tell that the answer was too large.
type callState struct {
	call engine.Call
	// tooLarge is set when the call's answer was cut off at the bound.
	tooLarge atomic.Bool
	// done is set when the call has returned, for or without an answer.
	done atomic.Bool
	// sessionGone is set when the upstream answered the call's request
	// 404 on the session it named: the session is gone, and the request
	// was refused unread (session.go).
	sessionGone atomic.Bool

	// Whether any byte of the call's request left this node (docs/guarantees.md):
	// over HTTP, each request made for the call is traced
	// (egress.TrackSend); over stdio, written is set once a byte of the
	// request went into the child's stdin.
	mu      sync.Mutex
	sends   []*egress.Send
	written atomic.Bool
	// onSent, when not nil, tells the engine that a byte of the call's
	// request left (engine.SentFunc): called when written is set, and by
	// each traced request's first byte written.
	onSent func()
}

// traceSend traces req, a request made for the call (over HTTP), and
// keeps net/http from sending it again once written (GuardResend),
// returning the request to send.
func (st *callState) traceSend(req *http.Request) *http.Request {
	ctx, send := egress.TrackSendNotify(req.Context(), st.onSent)
	st.mu.Lock()
	st.sends = append(st.sends, send)
	st.mu.Unlock()
	req = req.WithContext(ctx)
	send.GuardResend(req)
	return req
}

// sent reports whether a byte of the call's request may have left this
// node; when in doubt, it did.
func (st *callState) sent() bool {
	if st.written.Load() {
		return true
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, s := range st.sends {
		if s.Sent() {
			return true
		}
	}
	return false
}

// readChunk is the most one read from an upstream asks for.
const readChunk = 32 << 10

// unitReader hands on what it reads from r one whole unit at a time: an
// SSE event (up to its blank line), or a line (up to its newline). It
// holds a unit, in the chunks it was read in, until the unit is complete:
// a unit past max is then dropped having cost max bytes, where the SDK's
// readers, handed it as it comes, would have grown buffers of several
// times that. Past max, it calls over once with the unit's first bytes
// and fails from then on with errAnswerTooLarge, after handing on the
// complete units read before.
type unitReader struct {
	r    io.Reader
	max  int
	sse  bool // units are SSE events, else lines
	over func(head []byte)

	held    [][]byte // the unit being read
	n       int      // its bytes
	line    bool     // sse: the current line has bytes besides CR
	ready   [][]byte // complete units, to be read
	err     error    // to return once ready is drained
	scratch []byte
}

func (u *unitReader) Read(p []byte) (int, error) {
	for len(u.ready) == 0 {
		if u.err != nil {
			return 0, u.err
		}
		u.fill()
	}
	n := copy(p, u.ready[0])
	if u.ready[0] = u.ready[0][n:]; len(u.ready[0]) == 0 {
		u.ready[0] = nil
		u.ready = u.ready[1:]
	}
	return n, nil
}

// fill reads once from r.
func (u *unitReader) fill() {
	if u.scratch == nil {
		u.scratch = make([]byte, readChunk)
	}
	k, err := u.r.Read(u.scratch)
	for data := u.scratch[:k]; len(data) > 0; {
		end, complete := u.scan(data)
		u.held = append(u.held, bytes.Clone(data[:end]))
		if u.n > u.max {
			head := u.head()
			u.held, u.err = nil, errAnswerTooLarge
			u.over(head)
			return
		}
		if complete {
			u.ready = append(u.ready, u.held...)
			u.held, u.n = nil, 0
		}
		data = data[end:]
	}
	if err != nil {
		// What is held goes on as it is: the SDK sees the stream end
		// mid-unit, as it would have.
		u.ready = append(u.ready, u.held...)
		u.held, u.err = nil, err
	}
}

// scan counts the bytes of data that belong to the current unit (end),
// and tells whether the unit ends with them.
func (u *unitReader) scan(data []byte) (end int, complete bool) {
	for end < len(data) {
		i := bytes.IndexByte(data[end:], '\n')
		if i < 0 {
			u.n += len(data) - end
			u.line = u.line || len(bytes.TrimRight(data[end:], "\r")) > 0
			return len(data), false
		}
		seg := data[end : end+i+1]
		u.n += len(seg)
		end += i + 1
		blank := !u.line && len(bytes.TrimRight(seg, "\r\n")) == 0
		u.line = false
		if !u.sse || blank {
			return end, true
		}
	}
	return end, false
}

// head returns the first headBytes bytes of the held unit.
func (u *unitReader) head() []byte {
	var h []byte
	for _, c := range u.held {
		if len(h) >= headBytes {
			break
		}
		h = append(h, c[:min(len(c), headBytes-len(h))]...)
	}
	return h
}

// headBytes is how much of a unit over is given, to find the id of an
// answer cut off.
const headBytes = 256

// unitBody is a response body read through a unitReader.
type unitBody struct {
	unitReader
	io.Closer
}

// readAll reads r whole, in chunks joined at the end, failing with
// errAnswerTooLarge past max (having held no more than max bytes). Given
// the size (an HTTP body's Content-Length, which net/http holds the body
// to), it reads into a buffer of that size at once.
func readAll(r io.Reader, size int64, max int) ([]byte, error) {
	if size > int64(max) {
		return nil, errAnswerTooLarge
	}
	if size >= 0 {
		buf := make([]byte, size)
		k, err := io.ReadFull(r, buf)
		return buf[:k], err
	}
	var chunks [][]byte
	total := 0
	scratch := make([]byte, readChunk)
	for {
		k, err := r.Read(scratch)
		if total += k; total > max {
			return nil, errAnswerTooLarge
		}
		if k > 0 {
			chunks = append(chunks, bytes.Clone(scratch[:k]))
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return bytes.Join(chunks, nil), err
		}
	}
}

// boundedBody fails a read past max bytes of the whole body with
// errAnswerTooLarge, calling over once; so does every later read.
type boundedBody struct {
	rc   io.ReadCloser
	max  int
	over func()
	n    int
	err  error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) > b.max-b.n+1 {
		// One byte past the bound is enough to know.
		p = p[:b.max-b.n+1]
	}
	k, err := b.rc.Read(p)
	if b.n += k; b.n > b.max {
		b.err = errAnswerTooLarge
		b.over()
		return 0, b.err
	}
	return k, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }
