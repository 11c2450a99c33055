package cluster

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster/forward"
	"github.com/carmyhq/carmy/cluster/peer"
)

// writesConn is a net.Conn that keeps every Write apart.
type writesConn struct {
	net.Conn // nil: only the methods below are called
	mu       sync.Mutex
	writes   [][]byte
}

func (c *writesConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}
func (c *writesConn) SetWriteDeadline(time.Time) error { return nil }
func (c *writesConn) Close() error                     { return nil }

// The answers of batches that are all done when the first is answered go
// out in one write, in order, each a whole frame.
func TestAnswerFramesGathersDoneBatches(t *testing.T) {
	n := &Node{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	r := httptest.NewRequest("POST", "/", nil)
	conn := &writesConn{}
	work := make(chan streamWork, 8)
	for seq := range uint64(5) {
		// As startForwarded makes it on a node that does not lead: every
		// command answered at the door, the batch done as it is read.
		b := &forwardedBatch{cmds: [][]byte{[]byte("c")}, omit: []bool{false},
			results: []peer.Result{{Error: peer.ErrorOf(peer.ErrNotLeader)}}}
		work <- streamWork{seq: seq, batch: b}
	}
	close(work)
	n.answerFrames(r, conn, work)

	if len(conn.writes) != 1 {
		t.Fatalf("%d writes for 5 batches done at once, want 1", len(conn.writes))
	}
	br := bufio.NewReader(bytes.NewReader(conn.writes[0]))
	for want := range uint64(5) {
		body, err := forward.ReadFrame(br, forward.MaxAnswerFrame, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", want, err)
		}
		seq, results, err := forward.DecodeAnswer(body)
		if err != nil || seq != want || len(results) != 1 {
			t.Fatalf("answer %d: seq %d, %d results, %v", want, seq, len(results), err)
		}
		if results[0].Code != peer.ErrorOf(peer.ErrNotLeader).Code {
			t.Errorf("answer %d: %+v, want not the leader", want, results[0])
		}
	}
	if _, err := forward.ReadFrame(br, forward.MaxAnswerFrame, nil); err != io.EOF {
		t.Fatalf("after 5 answers: %v, want the end", err)
	}
}
