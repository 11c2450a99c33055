package forward

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// A batch frame and an answer frame come back from their bytes as they
// went: the commands with their omit flags, responses and errors.
func TestStreamFramesRoundTrip(t *testing.T) {
	batch := []*item{{data: []byte("a")}, {data: []byte("bc"), omitResult: true}, {data: make([]byte, 300)}}
	b := appendBatchFrame([]byte("junk"), 7, batch)
	body := b[len("junk")+4:]
	seq, cmds, omit, err := DecodeBatch(body)
	if err != nil || seq != 7 || len(cmds) != 3 || string(cmds[1]) != "bc" || len(cmds[2]) != 300 || omit[0] || !omit[1] || omit[2] {
		t.Fatalf("batch: seq %d, %d cmds, omit %v, %v", seq, len(cmds), omit, err)
	}

	resp := fsm.Response{Outcome: store.Replay, Record: store.Record{ExecutionID: "e-1", Data: json.RawMessage(`{"a":1}`), Seq: 9}}
	results := []peer.Result{
		{Response: &resp},
		{Error: peer.ErrorOf(peer.ErrNotLeader)},
		{Error: peer.Coded(store.CodeConflict, "no")},
		{Response: &fsm.Response{}},
	}
	a, err := AppendAnswer(nil, 7, results)
	if err != nil {
		t.Fatal(err)
	}
	seq, got, err := DecodeAnswer(a[4:])
	if err != nil || seq != 7 || len(got) != 4 {
		t.Fatalf("answer: seq %d, %d results, %v", seq, len(got), err)
	}
	if got[0].Response == nil || got[0].Response.Record.ExecutionID != "e-1" || string(got[0].Response.Record.Data) != `{"a":1}` || got[0].Response.Record.Seq != 9 {
		t.Errorf("response: %+v", got[0].Response)
	}
	if !errors.Is(got[1].Err(), peer.ErrNotLeader) || !errors.Is(got[2].Err(), store.ErrConflict) || got[3].Response == nil {
		t.Errorf("results: %+v", got)
	}
}

// Frames cut short, with bytes after their last entry, with a count the
// frame cannot hold or an unknown result kind are refused.
func TestStreamFramesRefuseMalformed(t *testing.T) {
	batch := appendBatchFrame(nil, 1, []*item{{data: []byte("abc")}})[4:]
	answer, _ := AppendAnswer(nil, 1, []peer.Result{{Error: peer.ErrorOf(peer.ErrNotLeader)}})
	answer = answer[4:]
	for _, b := range [][]byte{nil, batch[:len(batch)-1], append(append([]byte(nil), batch...), 0), {1, 200}} {
		if _, _, _, err := DecodeBatch(b); !errors.Is(err, ErrFrame) {
			t.Errorf("batch %x: %v, want ErrFrame", b, err)
		}
	}
	for _, b := range [][]byte{nil, answer[:len(answer)-1], append(append([]byte(nil), answer...), 0), {1, 1, 9}, {1, 1, 1, 0, 0, 0}} {
		if _, _, err := DecodeAnswer(b); !errors.Is(err, ErrFrame) {
			t.Errorf("answer %x: %v, want ErrFrame", b, err)
		}
	}
	big := []byte{0, 1, 0, 0}
	if _, err := ReadFrame(bufio.NewReader(strings.NewReader(string(big))), 1000, nil); !errors.Is(err, ErrFrame) {
		t.Errorf("a frame over the limit: %v", err)
	}
}

// FuzzDecodeBatchFrame: the decoder never panics, and what it accepts
// encodes back to a frame that decodes the same.
func FuzzDecodeBatchFrame(f *testing.F) {
	f.Add(appendBatchFrame(nil, 3, []*item{{data: []byte("x")}, {data: []byte("yz"), omitResult: true}})[4:])
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, cmds, omit, err := DecodeBatch(b)
		if err != nil {
			return
		}
		items := make([]*item, len(cmds))
		for i := range cmds {
			items[i] = &item{data: cmds[i], omitResult: omit[i]}
		}
		seq2, cmds2, omit2, err := DecodeBatch(appendBatchFrame(nil, seq, items)[4:])
		if err != nil || seq2 != seq || len(cmds2) != len(cmds) {
			t.Fatalf("re-encoded batch: %d %d %v", seq2, len(cmds2), err)
		}
		for i := range cmds {
			if string(cmds2[i]) != string(cmds[i]) || omit2[i] != omit[i] {
				t.Fatalf("command %d changed", i)
			}
		}
	})
}

// FuzzDecodeAnswerFrame: the decoder never panics, and what it accepts
// encodes back to a frame that decodes the same.
func FuzzDecodeAnswerFrame(f *testing.F) {
	resp := fsm.Response{Outcome: store.Reserved, Record: store.Record{ExecutionID: "e", Data: json.RawMessage(`[1]`)}}
	a, _ := AppendAnswer(nil, 2, []peer.Result{{Response: &resp}, {Error: peer.Coded(store.CodeNotFound, "m")}})
	f.Add(a[4:])
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, results, err := DecodeAnswer(b)
		if err != nil {
			return
		}
		again, err := AppendAnswer(nil, seq, results)
		if err != nil {
			t.Fatalf("decoded answer does not encode: %v", err)
		}
		seq2, results2, err := DecodeAnswer(again[4:])
		if err != nil || seq2 != seq || len(results2) != len(results) {
			t.Fatalf("re-encoded answer: %d %d %v", seq2, len(results2), err)
		}
		for i := range results {
			x, _ := json.Marshal(results[i])
			y, _ := json.Marshal(results2[i])
			if string(x) != string(y) {
				t.Fatalf("result %d changed: %s, %s", i, x, y)
			}
		}
	})
}

// fakeLeader plays a leader at the other end of forward streams: serve
// gets each batch and writes what it likes to w (writeAnswer, or bytes of
// its own); false closes the stream. It counts the streams opened.
type fakeLeader struct {
	addr    string
	streams atomic.Int32
}

func newFakeLeader(t *testing.T, serve func(seq uint64, cmds [][]byte, w io.Writer) bool) *fakeLeader {
	t.Helper()
	fl := &fakeLeader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != peer.StreamProtocol {
			http.Error(w, "bad upgrade", http.StatusBadRequest)
			return
		}
		fl.streams.Add(1)
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + peer.StreamProtocol + "\r\n\r\n")
		_ = brw.Flush()
		for {
			body, err := ReadFrame(brw.Reader, MaxBatchFrame, nil)
			if err != nil {
				return
			}
			seq, cmds, _, err := DecodeBatch(body)
			if err != nil {
				t.Errorf("fake leader: %v", err)
				return
			}
			if !serve(seq, cmds, conn) {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	fl.addr = srv.Listener.Addr().String()
	return fl
}

// writeAnswer writes the answer frame of batch seq.
func writeAnswer(w io.Writer, seq uint64, results ...peer.Result) bool {
	b, err := AppendAnswer(nil, seq, results)
	if err != nil {
		return false
	}
	_, err = w.Write(b)
	return err == nil
}

// testDialer opens streams as a node does, without its credentials: it
// asks the leader to upgrade a plain connection to peer.StreamProtocol. (The cluster
// package tests its own dialer's credentials and errors.)
type testDialer struct{}

func (testDialer) DialStream(ctx context.Context, addr string) (net.Conn, *bufio.Reader, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", peer.ErrNotSent, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/stream", nil)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", peer.StreamProtocol)
	br := bufio.NewReader(conn)
	var resp *http.Response
	if err = req.Write(conn); err == nil {
		resp, err = http.ReadResponse(br, req)
	}
	if err == nil && resp.StatusCode != http.StatusSwitchingProtocols {
		err = errors.New(resp.Status)
	}
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("%w: %w", peer.ErrNotSent, err)
	}
	return conn, br, nil
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) Batch(int, time.Duration) {}
func (nopObserver) Failed(error)             {}

// newTestForwarder returns a forwarder over testDialer.
func newTestForwarder(t *testing.T) *Forwarder {
	f := New(testDialer{}, nopObserver{})
	t.Cleanup(f.Close)
	return f
}

func forwardOne(t *testing.T, f *Forwarder, addr string, cmd string, wait time.Duration) (fsm.Response, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return f.Apply(ctx, addr, []byte(cmd), time.Now().Add(wait), false)
}

// Concurrent commands go over one stream, in pipelined batches, and each
// gets its own answer.
func TestStreamCarriesConcurrentBatches(t *testing.T) {
	fl := newFakeLeader(t, func(seq uint64, cmds [][]byte, w io.Writer) bool {
		results := make([]peer.Result, len(cmds))
		for i, c := range cmds {
			results[i] = peer.Result{Response: &fsm.Response{Record: store.Record{ExecutionID: string(c)}}}
		}
		return writeAnswer(w, seq, results...)
	})
	f := newTestForwarder(t)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			cmd := "cmd-" + string(rune('a'+i%26)) + strings.Repeat("x", i)
			resp, err := forwardOne(t, f, fl.addr, cmd, 5*time.Second)
			if err != nil || resp.Record.ExecutionID != cmd {
				t.Errorf("%s: %+v, %v", cmd, resp.Record, err)
			}
		})
	}
	wg.Wait()
	if n := fl.streams.Load(); n != 1 {
		t.Errorf("%d streams opened, want 1", n)
	}
}

// Each command's own error keeps its meaning over the stream, as over
// from its frame's error (TestForwardedErrorsKeepTheirMeaning from its JSON).
func TestStreamErrorsKeepTheirMeaning(t *testing.T) {
	cases := []struct {
		we  peer.Error
		is  error
		not []error
	}{
		{peer.Coded(store.CodeInvalidRequest, "empty command"), store.ErrInvalid, []error{store.ErrCommitUnknown}},
		{peer.ErrorOf(peer.ErrNotLeader), peer.ErrNotLeader, []error{store.ErrCommitUnknown}},
		{peer.ErrorOf(store.ErrCommitUnknown), store.ErrCommitUnknown, []error{store.ErrUnavailable, store.ErrInvalid}},
		{peer.Error{State: "from_the_future", Message: "m"}, store.ErrCommitUnknown, []error{store.ErrInvalid}},
		{peer.Coded(store.CodeUnavailable, "raft is overloaded"), store.ErrUnavailable, []error{store.ErrCommitUnknown}},
	}
	for _, tc := range cases {
		fl := newFakeLeader(t, func(seq uint64, _ [][]byte, w io.Writer) bool {
			return writeAnswer(w, seq, peer.Result{Error: tc.we})
		})
		_, err := forwardOne(t, newTestForwarder(t), fl.addr, "c", 5*time.Second)
		if !errors.Is(err, tc.is) {
			t.Errorf("%+v: %v, want %v", tc.we, err, tc.is)
		}
		for _, n := range tc.not {
			if errors.Is(err, n) {
				t.Errorf("%+v: %v matches %v too", tc.we, err, n)
			}
		}
	}
}

// A stream that breaks, or answers what cannot be read or out of order,
// after a batch was sent leaves the batch's outcome unknown: never a
// refusal, never "not sent". Its error is store.ErrCommitUnknown (code
// UNAVAILABLE) and matches no refusal, so that a runtime recording an
// outcome keeps trying instead of taking it for an invalid result (which
// left the execution running for good).
func TestStreamBrokenAfterSendIsOutcomeUnknown(t *testing.T) {
	cases := map[string]func(seq uint64, cmds [][]byte, w io.Writer) bool{
		"closed":  func(uint64, [][]byte, io.Writer) bool { return false },
		"garbage": func(_ uint64, _ [][]byte, w io.Writer) bool { _, _ = w.Write([]byte{0, 0, 0, 2, 9, 9}); return true },
		"wrong seq": func(seq uint64, _ [][]byte, w io.Writer) bool {
			return writeAnswer(w, seq+1, peer.Result{Response: &fsm.Response{}})
		},
		"too few":   func(seq uint64, _ [][]byte, w io.Writer) bool { return writeAnswer(w, seq) },
		"cut short": func(_ uint64, _ [][]byte, w io.Writer) bool { _, _ = w.Write([]byte{0, 0, 0, 9, 1}); return false },
		"over a limit": func(_ uint64, _ [][]byte, w io.Writer) bool {
			_, _ = w.Write([]byte{0xff, 0xff, 0xff, 0xff})
			return true
		},
	}
	refusals := []error{store.ErrInvalid, store.ErrConflict, store.ErrNotFound, store.ErrUnavailable, peer.ErrNotSent, peer.ErrNotLeader}
	for name, serve := range cases {
		t.Run(name, func(t *testing.T) {
			fl := newFakeLeader(t, serve)
			_, err := forwardOne(t, newTestForwarder(t), fl.addr, "c", 5*time.Second)
			if !errors.Is(err, store.ErrCommitUnknown) {
				t.Fatalf("err = %v, want store.ErrCommitUnknown", err)
			}
			if store.CodeOf(err) != store.CodeUnavailable {
				t.Errorf("code %q, want %s", store.CodeOf(err), store.CodeUnavailable)
			}
			for _, r := range refusals {
				if errors.Is(err, r) {
					t.Errorf("err = %v matches %v too", err, r)
				}
			}
		})
	}
}

// A leader that never answers leaves the batch's outcome unknown once its
// deadline (and the leader's allowance) has passed: the stream gives up on
// it (an outcomeUnknownError), not the caller's own context running out.
func TestStreamSilentLeaderTimesOut(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	fl := newFakeLeader(t, func(uint64, [][]byte, io.Writer) bool { <-release; return false })
	_, err := forwardOne(t, newTestForwarder(t), fl.addr, "c", 100*time.Millisecond)
	var unknown *outcomeUnknownError
	if !errors.As(err, &unknown) || !errors.Is(err, store.ErrCommitUnknown) {
		t.Fatalf("err = %v, want the stream's outcomeUnknownError", err)
	}
}

// A stream the leader closed while nothing was in flight is replaced by a
// new one for the next batch, which is answered (not taken as unknown).
func TestStreamReopensAfterIdleClose(t *testing.T) {
	fl := newFakeLeader(t, func(seq uint64, _ [][]byte, w io.Writer) bool {
		writeAnswer(w, seq, peer.Result{Response: &fsm.Response{Count: 1}})
		return false // close after each answer
	})
	f := newTestForwarder(t)
	for i := range 3 {
		// Wait until the forwarder has seen the close, so that the next
		// batch finds the stream broken rather than racing it.
		wait.Until(t, 10*time.Second, "the stream to be seen closed", func() bool {
			f.mu.Lock()
			slot := f.streams[fl.addr]
			f.mu.Unlock()
			return slot == nil || slot.s == nil || !slot.s.working()
		})
		if _, err := forwardOne(t, f, fl.addr, "c", 5*time.Second); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	if n := fl.streams.Load(); n != 3 {
		t.Errorf("%d streams, want 3", n)
	}
}
