package cluster_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// refuseCompletions makes n refuse whole the first times forwarded batches
// that carry a completion: the batch is dropped unread and the forward
// stream broken, so the follower cannot know whether it was applied. It
// returns the count of refusals.
func refuseCompletions(n *testNode, times int32) *atomic.Int32 {
	var refused atomic.Int32
	n.intercept(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/internal/v1/stream" {
				w = hijackWrap{ResponseWriter: w, wrap: func(c net.Conn) net.Conn {
					return &dropCompletions{Conn: c, br: bufio.NewReader(c), refused: &refused, times: times}
				}}
			}
			next.ServeHTTP(w, r)
		})
	})
	return &refused
}

// hijackWrap hands the connection a handler takes over through wrap.
type hijackWrap struct {
	http.ResponseWriter
	wrap func(net.Conn) net.Conn
}

func (h hijackWrap) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if brw.Reader.Buffered() > 0 {
		return nil, nil, errors.New("test: bytes after the upgrade request, before its answer")
	}
	wc := h.wrap(c)
	return wc, bufio.NewReadWriter(bufio.NewReader(wc), bufio.NewWriter(wc)), nil
}

// dropCompletions is a leader's end of a forward stream that, the first
// times a batch carries a completion, drops it unread and breaks the
// stream.
type dropCompletions struct {
	net.Conn
	br      *bufio.Reader
	pending []byte
	refused *atomic.Int32
	times   int32
}

func (d *dropCompletions) Read(p []byte) (int, error) {
	for len(d.pending) == 0 {
		var h [4]byte
		if _, err := io.ReadFull(d.br, h[:]); err != nil {
			return 0, err
		}
		body := make([]byte, binary.BigEndian.Uint32(h[:]))
		if _, err := io.ReadFull(d.br, body); err != nil {
			return 0, err
		}
		cmds, err := cluster.BatchFrameCommands(body)
		if err == nil && slices.ContainsFunc(cmds, isCompletion) && d.refused.Load() < d.times {
			d.refused.Add(1)
			_ = d.Conn.Close()
			return 0, errors.New("test: a batch with a completion dropped, the stream broken")
		}
		d.pending = append(h[:], body...)
	}
	n := copy(p, d.pending)
	d.pending = d.pending[n:]
	return n, nil
}

func isCompletion(c []byte) bool {
	t, _ := fsm.PeekType(c)
	return t == fsm.TypeComplete
}

// A leader that refuses whole the batches carrying a follower's
// completions (as it refused a body over its limit) leaves no execution
// running: the follower reads the refusal as "outcome unknown", never as
// an invalid completion, so the runtime on it keeps trying to record its
// tool's outcome until the leader takes it. Before, the refusal also
// matched store.ErrInvalid; the runtime gave up on the first one and the
// execution stayed running until a restart or a manual resolve.
func TestRuntimeRecordsThroughBatchesRefusedWhole(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	leader := c.leader()
	f := c.followers()[0]
	refused := refuseCompletions(leader, 3)

	app := carmy.App(carmy.WithNodeID(f.ID()), carmy.WithLogger(testLogger(t)))
	app.Tool("echo", func(_ context.Context, call carmy.Call) (any, error) { return call.Arguments, nil })
	app.IdempotencyStore(f.Store())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = app.Shutdown(ctx)
	})
	caller := carmy.Caller{Principal: "p"}
	req := carmy.Request{Tool: "echo", RequestID: "refused-whole", Arguments: json.RawMessage(`{"x":1}`)}
	resp, err := app.Call(t.Context(), caller, req)
	// The call answers completed once the completion is recorded, or (had
	// that taken longer than the store timeout) UNAVAILABLE meanwhile;
	// never with the refusal itself.
	if err != nil && (!errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrInvalid)) {
		t.Fatalf("Call: %v, want completed (or UNAVAILABLE while the outcome is recorded)", err)
	}
	if err == nil && resp.Record.Status != store.StatusCompleted {
		t.Fatalf("Call: %s, want completed", resp.Record.Status)
	}
	if refused.Load() == 0 {
		t.Fatal("the leader refused no batch: the test tested nothing")
	}
	k := store.Key{Principal: "p", RequestID: "refused-whole"}
	testutil.WaitUntil(t, 30*time.Second, "the execution to be completed", func() bool {
		rec, err := leader.Store().Lookup(t.Context(), k)
		return err == nil && rec.Status == store.StatusCompleted
	})
	again, err := app.Call(t.Context(), caller, req)
	if err != nil || !again.Replayed || again.Record.Status != store.StatusCompleted || string(again.Record.Data) != `{"x":1}` {
		t.Fatalf("retry: %+v, %v; want a replay of completed {\"x\":1}", again, err)
	}
}
