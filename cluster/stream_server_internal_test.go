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

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster/forward"
	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/cluster/raftlog"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/tests/testutil"
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

func (c *writesConn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}
func (c *writesConn) Close() error { return nil }

// The answers of batches that are all done when the first is answered go
// out in one write, in order, each a whole frame.
func TestAnswerFramesGathersDoneBatches(t *testing.T) {
	n := &Node{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	r := httptest.NewRequest("POST", "/", nil)
	conn := &writesConn{}
	work := make(chan streamWork, 8)
	for seq := range uint64(5) {
		work <- streamWork{seq: seq, batch: refusedBatch()}
	}
	close(work)
	n.answerFrames(r, conn, work)

	if len(conn.writes) != 1 {
		t.Fatalf("%d writes for 5 batches done at once, want 1", len(conn.writes))
	}
	wantAnswers(t, conn.writes[0], 0, 5)
}

// A batch not done when the answers before it are gathered ends their
// write; it goes, once done, with the done batches after it in the next.
func TestAnswerFramesWritesWhatIsDoneAndWaitsForTheRest(t *testing.T) {
	logs := raftlog.NewQueuedLog(raft.NewInmemStore(), "memory")
	t.Cleanup(func() { logs.Close() })
	n := &Node{log: slog.New(slog.NewTextHandler(io.Discard, nil)), logs: logs, metrics: newNodeMetrics(), cfg: Config{LeaderWait: time.Minute}}
	r := httptest.NewRequest("POST", "/", nil)
	conn := &writesConn{}
	// Batch 2 waits for its command's round, as startForwarded makes it
	// on a leader.
	pending := newProposal([]byte("c"), time.Minute)
	waiting := &forwardedBatch{cmds: [][]byte{[]byte("c")}, omit: []bool{false}, results: make([]peer.Result, 1),
		items: []*proposal{pending}, start: time.Now()}
	work := make(chan streamWork, 8)
	for seq, b := range []*forwardedBatch{refusedBatch(), refusedBatch(), waiting, refusedBatch()} {
		work <- streamWork{seq: uint64(seq), batch: b}
	}
	close(work)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.answerFrames(r, conn, work)
	}()
	testutil.WaitUntil(t, 10*time.Second, "the answers of the batches done first", func() bool { return conn.count() == 1 })
	pending.done <- proposalResult{resp: fsm.Response{}}
	<-done
	if len(conn.writes) != 2 {
		t.Fatalf("%d writes, want 2: batches 0–1, then 2–3", len(conn.writes))
	}
	wantAnswers(t, conn.writes[0], 0, 2)
	wantAnswers(t, conn.writes[1], 2, 2)
}

// refusedBatch is a batch as startForwarded makes it on a node that does
// not lead: its command answered at the door, done as it is read.
func refusedBatch() *forwardedBatch {
	return &forwardedBatch{cmds: [][]byte{[]byte("c")}, omit: []bool{false},
		results: []peer.Result{{Error: peer.ErrorOf(peer.ErrNotLeader)}}}
}

// wantAnswers checks that write holds the whole answer frames of batches
// first to first+count-1, in order, one result each, and nothing else.
func wantAnswers(t *testing.T, write []byte, first, count uint64) {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(write))
	for want := first; want < first+count; want++ {
		body, err := forward.ReadFrame(br, forward.MaxAnswerFrame, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", want, err)
		}
		seq, results, err := forward.DecodeAnswer(body)
		if err != nil || seq != want || len(results) != 1 {
			t.Fatalf("answer %d: seq %d, %d results, %v", want, seq, len(results), err)
		}
	}
	if _, err := forward.ReadFrame(br, forward.MaxAnswerFrame, nil); err != io.EOF {
		t.Fatalf("after answers %d–%d: %v, want the end of the write", first, first+count-1, err)
	}
}
