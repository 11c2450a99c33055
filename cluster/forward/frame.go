package forward

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// The forward stream: a follower's kept-alive connection to the leader
// that carries its forwarded batches, many at a time; it is the only way
// a command reaches the leader from another node. It begins as an
// HTTP/1.1 request to the leader's stream path (package peer's), with
// the cluster key, node id and protocol version as any peer request,
// asking to upgrade to peer.StreamProtocol; the leader answers 101 and from then on the connection
// carries frames. The follower sends batches; the leader answers every
// batch, in the order it received them.
//
// A frame is a 4-byte big-endian length and that many bytes of body:
//
//	batch:  uvarint seq, uvarint n, then n × (byte flags, uvarint len, command)
//	answer: uvarint seq, uvarint n, then n × result
//	result: byte 0, 4-byte length, fsm.AppendResponse's bytes (applied), or
//	        byte 1, then code, state and message as uvarint-prefixed
//	        strings (a peer.Error: nothing applied, or outcome unknown)
//
// seq numbers the batches of one stream from 0; an answer carries its
// batch's, and one out of order is a broken stream. Flag bit 0 of a
// command is item.omitResult: the answer, when it is a success, leaves
// the record's data and error out (the follower has them).
const (
	flagOmitResult = 1 << 0

	resultResponse = 0
	resultError    = 1
)

// Frame bounds and the time a frame may take to be written.
//
// MaxBatchFrame, the largest batch frame a leader reads, holds the largest
// batch a forwarder builds: a single command of up to
// peer.MaxCommandBytes (or MaxBatchBytes of smaller ones, less), plus the
// frame's envelope (a flag byte and a length per command: a few KiB for
// MaxBatch commands; 64 KiB is ample).
//
// MaxAnswerFrame bounds an answer frame a follower reads. An answer may be
// larger than its batch (a reservation that turns out a replay carries the
// record's data back), so it is bounded only against a broken peer; an
// answer over it leaves its commands' outcomes unknown, like a lost one.
//
// WriteTimeout bounds writing one frame, on either end.
const (
	MaxBatchFrame  = peer.MaxCommandBytes + 64<<10
	MaxAnswerFrame = 512 << 20
	WriteTimeout   = 10 * time.Second
)

// ErrFrame is a frame that cannot be read: the stream is broken.
var ErrFrame = errors.New("cluster: malformed stream frame")

// AppendBatch appends the frame of a batch of cmds, numbered seq, to b;
// omit[i] (when omit is not nil) asks for the success of command i to be
// answered without its record's data and error.
func AppendBatch(b []byte, seq uint64, cmds [][]byte, omit []bool) []byte {
	batch := make([]*item, len(cmds))
	for i, c := range cmds {
		batch[i] = &item{data: c, omitResult: omit != nil && omit[i]}
	}
	return appendBatchFrame(b, seq, batch)
}

// appendBatchFrame appends the frame of batch, numbered seq, to b.
func appendBatchFrame(b []byte, seq uint64, batch []*item) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(len(batch)))
	for _, it := range batch {
		var flags byte
		if it.omitResult {
			flags |= flagOmitResult
		}
		b = append(b, flags)
		b = binary.AppendUvarint(b, uint64(len(it.data)))
		b = append(b, it.data...)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

// AppendAnswer appends the frame of the answer to batch seq to b.
func AppendAnswer(b []byte, seq uint64, results []peer.Result) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(len(results)))
	for _, res := range results {
		if res.Response == nil {
			b = append(b, resultError)
			for _, s := range []string{string(res.Code), res.State, res.Message} {
				b = binary.AppendUvarint(b, uint64(len(s)))
				b = append(b, s...)
			}
			continue
		}
		b = append(b, resultResponse, 0, 0, 0, 0)
		at := len(b)
		var err error
		if b, err = fsm.AppendResponse(b, *res.Response); err != nil {
			return b[:start], err
		}
		binary.BigEndian.PutUint32(b[at-4:], uint32(len(b)-at))
	}
	if len(b)-start-4 > MaxAnswerFrame {
		return b[:start], fmt.Errorf("an answer of %d bytes is over the limit of %d", len(b)-start-4, MaxAnswerFrame)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b, nil
}

// ReadFrame reads one frame's body from r, into buf when it fits (the
// body is then only valid until the next call with buf). A body over max
// is an error, before any of it is read.
func ReadFrame(r *bufio.Reader, max int, buf []byte) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(h[:]))
	if n > max {
		return nil, fmt.Errorf("%w: a frame of %d bytes is over the limit of %d", ErrFrame, n, max)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("%w: cut short: %w", ErrFrame, err)
	}
	return buf, nil
}

// frameReader reads the fields of one frame's body; the first that
// cannot be read sets err.
type frameReader struct {
	b   []byte
	err error
}

func (f *frameReader) fail(what string) {
	if f.err == nil {
		f.err = fmt.Errorf("%w: %s", ErrFrame, what)
	}
	f.b = nil
}

func (f *frameReader) uint() uint64 {
	x, n := binary.Uvarint(f.b)
	if n <= 0 {
		f.fail("bad or missing number")
		return 0
	}
	f.b = f.b[n:]
	return x
}

func (f *frameReader) byte() byte {
	if len(f.b) == 0 {
		f.fail("cut short")
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	return c
}

// bytes returns the next field with a uvarint length (a sub-slice of the
// body).
func (f *frameReader) bytes() []byte { return f.take(f.uint()) }

// bytes32 returns the next field with a 4-byte length.
func (f *frameReader) bytes32() []byte {
	if len(f.b) < 4 {
		f.fail("cut short")
		return nil
	}
	n := binary.BigEndian.Uint32(f.b)
	f.b = f.b[4:]
	return f.take(uint64(n))
}

// take returns the next n bytes.
func (f *frameReader) take(n uint64) []byte {
	if f.err != nil {
		return nil
	}
	if n > uint64(len(f.b)) {
		f.fail("a field runs past the frame")
		return nil
	}
	out := f.b[:n:n]
	f.b = f.b[n:]
	return out
}

// count reads a number of entries, each at least min bytes long, and
// refuses one the rest of the frame cannot hold (so a bad count never
// sizes a large allocation).
func (f *frameReader) count(min int) int {
	n := f.uint()
	if n > uint64(len(f.b)/min) {
		f.fail("more entries than the frame holds")
		return 0
	}
	return int(n)
}

func (f *frameReader) end() error {
	if f.err == nil && len(f.b) > 0 {
		f.fail(fmt.Sprintf("%d bytes after the last entry", len(f.b)))
	}
	return f.err
}

// DecodeBatch reads a batch frame's body. The commands are
// sub-slices of body, which must not be reused while they are in use.
func DecodeBatch(body []byte) (seq uint64, cmds [][]byte, omit []bool, err error) {
	f := frameReader{b: body}
	seq = f.uint()
	n := f.count(2)
	cmds, omit = make([][]byte, n), make([]bool, n)
	for i := 0; i < n && f.err == nil; i++ {
		flags := f.byte()
		omit[i] = flags&flagOmitResult != 0
		cmds[i] = f.bytes()
	}
	if err := f.end(); err != nil {
		return 0, nil, nil, err
	}
	return seq, cmds, omit, nil
}

// DecodeAnswer reads an answer frame's body.
func DecodeAnswer(body []byte) (seq uint64, results []peer.Result, err error) {
	f := frameReader{b: body}
	seq = f.uint()
	n := f.count(2)
	results = make([]peer.Result, n)
	for i := 0; i < n && f.err == nil; i++ {
		switch f.byte() {
		case resultResponse:
			b := f.bytes32()
			if f.err != nil {
				break
			}
			r, err := fsm.DecodeResponse(b)
			if err != nil {
				f.fail(err.Error())
				break
			}
			results[i].Response = &r
		case resultError:
			code, state, msg := f.bytes(), f.bytes(), f.bytes()
			results[i].Error = peer.Error{Code: store.Code(code), State: string(state), Message: string(msg)}
			if f.err == nil && !results[i].IsError() {
				f.fail("an error result without a code or state")
			}
		default:
			f.fail("unknown result kind")
		}
	}
	if err := f.end(); err != nil {
		return 0, nil, err
	}
	return seq, results, nil
}
