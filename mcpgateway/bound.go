package mcpgateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/carmyhq/carmy/engine"
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
}

// boundedBody bounds what is read of one HTTP response: each event of a
// text/event-stream (the bytes up to a blank line), or else the whole
// body, to max bytes. A read past the bound fails with errAnswerTooLarge
// and calls over once; so does every later read, which also stops the
// SDK from draining the rest of an endless body.
type boundedBody struct {
	rc   io.ReadCloser
	max  int
	sse  bool
	over func()
	n    int  // bytes of the body, or of the current event
	line bool // sse: the current line has bytes besides CR
	err  error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if !b.sse && len(p) > b.max-b.n+1 {
		// One byte past the bound is enough to know.
		p = p[:b.max-b.n+1]
	}
	k, err := b.rc.Read(p)
	if b.sse {
		b.countEvents(p[:k])
	} else {
		b.n += k
	}
	if b.n > b.max {
		b.err = errAnswerTooLarge
		b.over()
		return 0, b.err
	}
	return k, err
}

// countEvents advances the count of the current event over data: a blank
// line (only CR before its LF) ends an event, and the next starts at 0.
func (b *boundedBody) countEvents(data []byte) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		seg := data
		if i >= 0 {
			seg = data[:i+1]
		}
		b.n += len(seg)
		if b.n > b.max {
			return
		}
		if len(bytes.TrimRight(seg, "\r\n")) > 0 {
			b.line = true
		}
		if i >= 0 {
			if !b.line {
				b.n = 0
			}
			b.line = false
		}
		data = data[len(seg):]
	}
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// headBytes is how much of a line lineBound keeps, to find the id of an
// answer it cuts off.
const headBytes = 256

// lineBound bounds each line read from r (one JSON-RPC message of a stdio
// child) to max bytes besides its newline. On a longer line, Read returns
// the complete lines before it, calls over once with the line's first
// bytes, and fails from then on with errAnswerTooLarge: the stream is out
// of step and the child must go.
type lineBound struct {
	r    io.Reader
	max  int
	over func(head []byte)
	n    int    // bytes of the current line so far
	head []byte // its first headBytes bytes
	err  error
}

func (l *lineBound) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	k, err := l.r.Read(p)
	whole := 0 // bytes of p[:k] that end complete lines
	for off := 0; off < k; {
		i := bytes.IndexByte(p[off:k], '\n')
		end := k
		if i >= 0 {
			end = off + i + 1
		}
		seg := p[off:end]
		if room := headBytes - len(l.head); room > 0 {
			l.head = append(l.head, seg[:min(room, len(seg))]...)
		}
		l.n += len(seg)
		if i >= 0 {
			l.n-- // the newline
		}
		if l.n > l.max {
			l.err = errAnswerTooLarge
			l.over(l.head)
			if whole == 0 {
				return 0, l.err
			}
			return whole, nil
		}
		if i >= 0 {
			l.n, l.head, whole = 0, l.head[:0], end
		}
		off = end
	}
	return k, err
}

// Close does nothing: the child's stdout is closed once it has exited.
func (l *lineBound) Close() error { return nil }

// headID returns the JSON text of the "id" member of a JSON-RPC message,
// read from its first bytes, if they hold it whole.
func headID(head []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(head))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", false
		}
		if key, _ := t.(string); key == "id" {
			return string(v), true
		}
	}
	return "", false
}

// readAnswer reads the bounded JSON body of a call's answer whole. One
// past the bound becomes a JSON-RPC error answer to the call: the SDK
// takes a body it cannot read for a broken connection and drops it, with
// every other call on it, while an error answer ends this call alone
// (its state says why). Another read error is left for the SDK to see.
func readAnswer(req *http.Request, resp *http.Response, max int) {
	var buf bytes.Buffer
	if resp.ContentLength > 0 {
		buf.Grow(int(min(resp.ContentLength, int64(max)+1)))
	}
	_, err := buf.ReadFrom(resp.Body)
	resp.Body.Close()
	resp.ContentLength = -1
	switch id, ok := requestID(req); {
	case errors.Is(err, errAnswerTooLarge) && ok:
		resp.Body = io.NopCloser(strings.NewReader(`{"jsonrpc":"2.0","id":` + id +
			`,"error":{"code":-32603,"message":"the answer is larger than the node's result limit"}}`))
	case err != nil:
		resp.Body = io.NopCloser(io.MultiReader(&buf, errReader{err}))
	default:
		resp.Body = io.NopCloser(&buf)
	}
}

// errReader fails every read with err.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// requestID returns the JSON text of the id of the JSON-RPC request req
// carries.
func requestID(req *http.Request) (string, bool) {
	if req.GetBody == nil {
		return "", false
	}
	body, err := req.GetBody()
	if err != nil {
		return "", false
	}
	defer body.Close()
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.NewDecoder(body).Decode(&m) != nil || len(m.ID) == 0 {
		return "", false
	}
	return string(m.ID), true
}
