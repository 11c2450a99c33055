package forward

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/carmyhq/carmy/cluster/peer"
)

// Bounds of a forward stream on the follower's side.
//
// streamIdle: a stream with no batch in flight for this long is closed; the
// next batch opens another. streamDialTimeout bounds connecting and
// upgrading.
const (
	streamIdle        = 90 * time.Second
	streamDialTimeout = 5 * time.Second
)

// errStreamBroken: the stream broke before the batch was sent.
var errStreamBroken = errors.New("cluster: the forward stream is closed")

// streamSlot holds the stream to one leader address: mu is held while
// one is opened, so concurrent batches wait for it rather than open many.
type streamSlot struct {
	mu sync.Mutex
	s  *fwdStream
}

func (slot *streamSlot) close() {
	slot.mu.Lock()
	s := slot.s
	slot.mu.Unlock()
	if s != nil {
		s.fail(fmt.Errorf("%w: the node is shutting down", errStreamBroken), nil)
	}
}

// fwdStream is a follower's open forward stream to one leader address.
// Batches are written in turn (wmu); one reader goroutine (read) matches
// the answers, which come in order, to the batches in pending.
type fwdStream struct {
	f    *Forwarder
	addr string
	conn net.Conn
	br   *bufio.Reader

	wmu sync.Mutex // one batch written at a time; guards seq and buf
	seq uint64
	buf []byte

	mu      sync.Mutex
	pending []*streamSent // sent, not yet answered, in order
	err     error         // why the stream broke; nil while it works
}

// streamSent is a batch sent on a stream.
type streamSent struct {
	seq      uint64
	batch    []*item
	deadline time.Time // the answer is not waited for past it
	start    time.Time
}

// sendStream sends batch over the stream to addr, opening one when there
// is none. nil means it was sent: the stream's reader delivers the answer
// and frees the batch's slot. Otherwise nothing of the batch was sent, and
// the error says why.
func (f *Forwarder) sendStream(addr string, batch []*item, deadline time.Time) error {
	s, err := f.streamTo(addr, deadline)
	if err != nil {
		return err
	}
	if err = s.send(batch, deadline); errors.Is(err, errStreamBroken) {
		// It broke in the meantime (closed while idle, say): once more,
		// on a new one.
		if s, err = f.streamTo(addr, deadline); err == nil {
			err = s.send(batch, deadline)
		}
	}
	if errors.Is(err, errStreamBroken) {
		err = fmt.Errorf("%w: %w", peer.ErrNotSent, err)
	}
	return err
}

// streamTo returns the working stream to addr, opening one if need be.
func (f *Forwarder) streamTo(addr string, deadline time.Time) (*fwdStream, error) {
	f.mu.Lock()
	if f.ctx.Err() != nil {
		f.mu.Unlock()
		return nil, fmt.Errorf("%w: the node is shutting down", peer.ErrNotSent)
	}
	slot := f.streams[addr]
	if slot == nil {
		slot = &streamSlot{}
		f.streams[addr] = slot
	}
	f.mu.Unlock()

	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.s != nil && slot.s.working() {
		return slot.s, nil
	}
	dialBy := time.Now().Add(streamDialTimeout)
	if deadline.Before(dialBy) {
		dialBy = deadline
	}
	ctx, cancel := context.WithDeadline(f.ctx, dialBy)
	defer cancel()
	conn, br, err := f.dial.DialStream(ctx, addr)
	if err != nil {
		return nil, err
	}
	s := &fwdStream{f: f, addr: addr, conn: conn, br: br}
	// Closed meanwhile: close has its slot (added before ctx ended) and
	// waits for slot.mu to close what this sets, so nothing leaks.
	_ = conn.SetReadDeadline(time.Now().Add(streamIdle))
	slot.s = s
	go s.read()
	return s, nil
}

// working reports whether s has not broken.
func (s *fwdStream) working() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err == nil
}

// send writes batch's frame. nil means it was written whole (its answer
// will come to read, or its failure through fail); errStreamBroken means
// the stream had broken, and nothing was written.
func (s *fwdStream) send(batch []*item, deadline time.Time) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	sent := &streamSent{seq: s.seq, batch: batch, deadline: deadline, start: time.Now()}
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return fmt.Errorf("%w: %w", errStreamBroken, err)
	}
	s.pending = append(s.pending, sent)
	if len(s.pending) == 1 {
		_ = s.conn.SetReadDeadline(deadline)
	}
	s.mu.Unlock()
	s.seq++
	s.buf = appendBatchFrame(s.buf[:0], sent.seq, batch)
	_ = s.conn.SetWriteDeadline(time.Now().Add(WriteTimeout))
	n, err := s.conn.Write(s.buf)
	whole := n == len(s.buf)
	if cap(s.buf) > 1<<20 {
		s.buf = nil // keep no large batch's buffer
	}
	if err != nil {
		// A frame cut short is never read, so never applied: unless
		// it went whole, the batch was not sent.
		notSent := sent
		if whole {
			notSent = nil
		}
		s.fail(fmt.Errorf("sending a batch: %w", err), notSent)
	}
	return nil
}

// read delivers the answers of the stream's batches until it breaks. A
// stream with nothing in flight for streamIdle is closed here too (its
// read deadline passes).
func (s *fwdStream) read() {
	var buf []byte
	for {
		body, err := ReadFrame(s.br, MaxAnswerFrame, buf)
		if err != nil {
			s.fail(err, nil)
			return
		}
		s.f.heard.Store(time.Now().UnixNano())
		if cap(body) <= 1<<20 {
			buf = body // the results are copies: the buffer can be reused
		}
		seq, results, err := DecodeAnswer(body)
		s.mu.Lock()
		if err == nil && len(s.pending) == 0 {
			err = fmt.Errorf("%w: an answer to no batch", ErrFrame)
		}
		if err == nil && (seq != s.pending[0].seq || len(results) != len(s.pending[0].batch)) {
			err = fmt.Errorf("%w: answer %d with %d results for batch %d of %d commands",
				ErrFrame, seq, len(results), s.pending[0].seq, len(s.pending[0].batch))
		}
		if err != nil {
			s.mu.Unlock()
			s.fail(err, nil)
			return
		}
		head := s.pending[0]
		s.pending[0] = nil
		s.pending = s.pending[1:]
		if len(s.pending) > 0 {
			_ = s.conn.SetReadDeadline(s.pending[0].deadline)
		} else {
			_ = s.conn.SetReadDeadline(time.Now().Add(streamIdle))
		}
		s.mu.Unlock()
		s.f.finish(s.addr, head.batch, results, nil, head.start)
		s.f.release(head.batch)
	}
}

// fail breaks the stream for cause (the first cause is kept), closes it
// and gives every batch in flight its outcome: unknown, since it may have
// been applied, except notSent, which was not sent whole.
func (s *fwdStream) fail(cause error, notSent *streamSent) {
	s.mu.Lock()
	if s.err == nil {
		s.err = cause
	}
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	_ = s.conn.Close()
	for _, p := range pending {
		var err error = &outcomeUnknownError{addr: s.addr, cause: cause}
		if p == notSent {
			err = fmt.Errorf("%w: %w", peer.ErrNotSent, cause)
		}
		s.f.finish(s.addr, p.batch, nil, err, p.start)
		s.f.release(p.batch)
	}
}
