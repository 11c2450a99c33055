package cluster

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/carmyhq/carmy/cluster/forward"
	"github.com/carmyhq/carmy/cluster/peer"
)

// Bounds of a served forward stream.
//
// streamServerIdle: a stream that sends no batch for this long is closed
// (a forwarder closes its own after 90 s of no batch in flight, shorter;
// this ends one whose follower vanished without closing it).
// forward.WriteTimeout bounds writing one answer.
const streamServerIdle = 5 * time.Minute

// serveStream serves a forward stream (see package forward) on conn,
// the connection of r that peer.Handler took over: it answers 101
// (peer.AcceptStream), then reads batches and answers each, in order,
// until the follower closes it, it breaks, or the node stops. The caller
// was authenticated as any peer request; its batches are audited as HTTP
// batches are, one line each.
func (n *Node) serveStream(r *http.Request, conn net.Conn, brw *bufio.ReadWriter) {
	if !n.streams.add(conn) {
		_ = conn.Close() // the node is stopping
		return
	}
	defer n.streams.remove(conn)
	_ = conn.SetDeadline(time.Time{})
	if peer.AcceptStream(brw) != nil {
		return
	}
	n.serveFrames(r, conn, brw.Reader)
}

// streamWork is a batch read from a stream, on its way to its answer.
type streamWork struct {
	seq   uint64
	batch *forwardedBatch
}

// serveFrames reads batches from a stream and hands each to the proposer
// at once; a second goroutine (answerFrames) answers them in order. A
// frame that cannot be read ends the stream: the follower then takes
// every batch it has not had an answer to as of unknown outcome.
func (n *Node) serveFrames(r *http.Request, conn net.Conn, br *bufio.Reader) {
	work := make(chan streamWork, 8*forward.MaxInFlight)
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		n.answerFrames(r, conn, work)
	}()
	defer func() {
		close(work)
		<-answered
	}()
	for {
		_ = conn.SetReadDeadline(time.Now().Add(streamServerIdle))
		// A new buffer for each frame: its commands are sub-slices of it,
		// and stay in the proposer's queue after the next frame is read.
		body, err := forward.ReadFrame(br, forward.MaxBatchFrame, nil)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				n.log.Info("forward stream ended", append(callerOf(r), slog.Any("err", err))...)
			}
			return
		}
		seq, cmds, omit, err := forward.DecodeBatch(body)
		if err != nil {
			n.log.Warn("forward stream: a batch cannot be read; closing the stream", append(callerOf(r), slog.Any("err", err))...)
			_ = conn.Close()
			return
		}
		work <- streamWork{seq: seq, batch: n.startForwarded(cmds, omit)}
	}
}

// answerFrames writes the answer of every batch of work, in order, once
// all its commands have their outcome. The answers of the batches that
// are done by the time one is written go with it, in one write (up to
// maxAnswerWrite bytes): the commands of one round get their outcomes at
// once, so a follower whose batches shared a round is answered with one
// write and one read rather than one of each per batch. An answer that
// cannot be encoded, or a write that fails, closes the connection (after
// the answers gathered before it are written); from then on it only waits
// for the rest, so that the reader is never blocked.
func (n *Node) answerFrames(r *http.Request, conn net.Conn, work <-chan streamWork) {
	var (
		buf    []byte
		broken bool        // the connection is closed
		held   *streamWork // taken from work, not yet done: the next to answer
	)
	for {
		var sw streamWork
		if held != nil {
			sw, held = *held, nil
		} else if w, ok := <-work; ok {
			sw = w
		} else {
			return
		}
		if broken {
			n.finishForwarded(r, sw.batch) // only wait
			continue
		}
		buf = buf[:0]
		ended := false // work was closed while gathering
		for {
			results := n.finishForwarded(r, sw.batch)
			var err error
			if buf, err = forward.AppendAnswer(buf, sw.seq, results); err != nil {
				n.log.Warn("forward stream: an answer cannot be sent; closing the stream", append(callerOf(r), slog.Any("err", err))...)
				broken = true
				break
			}
			if len(buf) >= maxAnswerWrite {
				break
			}
			next, ok, ready := readyWork(work)
			if !ok {
				ended = true
				break
			}
			if !ready {
				held = next // nil when nothing was waiting
				break
			}
			sw = *next
		}
		if len(buf) > 0 {
			_ = conn.SetWriteDeadline(time.Now().Add(forward.WriteTimeout))
			if _, err := conn.Write(buf); err != nil { // whole frames, built in buf: no buffering
				n.log.Warn("forward stream: an answer cannot be sent; closing the stream", append(callerOf(r), slog.Any("err", err))...)
				broken = true
			}
		}
		if broken {
			_ = conn.Close()
		}
		if cap(buf) > 1<<20 {
			buf = nil // keep no large answer's buffer
		}
		if ended {
			return
		}
	}
}

// readyWork takes the next batch of work without waiting: ok is false
// once work is closed, next is nil when nothing waits, and ready says
// whether the batch taken is done (finishForwarded will not wait).
func readyWork(work <-chan streamWork) (next *streamWork, ok, ready bool) {
	select {
	case w, open := <-work:
		if !open {
			return nil, false, false
		}
		return &w, true, w.batch.done()
	default:
		return nil, true, false
	}
}

// maxAnswerWrite bounds the answers gathered into one write.
const maxAnswerWrite = 256 << 10

// connSet is the forward streams a node serves, closed when it stops.
type connSet struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// add registers c; false once closeAll has run.
func (s *connSet) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.conns == nil {
		s.conns = make(map[net.Conn]struct{})
	}
	s.conns[c] = struct{}{}
	return true
}

// remove closes c and forgets it.
func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	_ = c.Close()
}

// closeAll closes every stream, and any added later.
func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		_ = c.Close()
	}
}
