package embed_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/embed"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// startGated starts a node of an embedded Raft cluster (as
// startEmbedded) whose tools need approval: "pay" by bob within an hour,
// "quick" by bob within a second. runs counts pay's runs.
func startGated(t *testing.T, id, join string, runs *atomic.Int64) *embed.Node {
	t.Helper()
	app := carmy.App(carmy.WithNodeID(id), carmy.WithLogger(quietLogger()))
	pay := func(_ context.Context, call carmy.Call) (any, error) {
		return map[string]any{"run": runs.Add(1), "args": call.Arguments}, nil
	}
	for _, spec := range []carmy.ToolSpec{
		{Name: "pay", Func: pay, Approval: &engine.Approval{Approvers: []string{"bob"}}},
		{Name: "quick", Func: pay, Approval: &engine.Approval{Approvers: []string{"bob"}, ExpiresAfter: time.Second}},
	} {
		if err := app.AddTool(spec); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raft := &cluster.Config{NodeID: id, DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0", Fast: true,
		ClusterKey: "embedded-cluster-key-0123456789"}
	if join == "" {
		raft.Bootstrap = true
	} else {
		raft.Join = []string{join}
	}
	node, err := embed.StartNode(t.Context(), embed.Config{Runtime: app, Listener: ln, Raft: raft})
	if err != nil {
		t.Fatalf("StartNode %s: %v", id, err)
	}
	t.Cleanup(func() { _ = node.Close(context.Background()) })
	return node
}

// TestApprovalAcrossNodes: a gated call reserved on n1 awaits (its retry
// on n3 too); n1 goes away; 50 concurrent approvals by bob on n2 and n3
// run the tool once, on a live node, and the 49 others are told the
// record as it stands; the retry replays the outcome. The caller may not
// approve its own call, nor may a principal who is not an approver; a
// denial is replayed; a gate no one decides on expires.
func TestApprovalAcrossNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a 3-node Raft cluster")
	}
	var runs atomic.Int64
	first := startGated(t, "n1", "", &runs)
	nodes := []*embed.Node{first, startGated(t, "n2", first.Addr().String(), &runs), startGated(t, "n3", first.Addr().String(), &runs)}
	ready := func(nodes ...*embed.Node) {
		testutil.WaitFor(t, 30*time.Second, "every node ready, with three members", func() error {
			for _, n := range nodes {
				if err := n.Runtime().Ready(t.Context()); err != nil {
					return err
				}
				st, err := n.Raft().Status(t.Context())
				if err != nil {
					return err
				}
				if len(st.Nodes) != 3 {
					return errors.New("not three members yet")
				}
			}
			return nil
		})
	}
	ready(nodes...)
	alice, bob, carol := engine.Caller{Principal: "alice"}, engine.Caller{Principal: "bob"}, engine.Caller{Principal: "carol"}
	call := func(n *embed.Node, tool, rid string) engine.Response {
		t.Helper()
		resp, err := n.Runtime().Call(t.Context(), alice, engine.Request{Tool: tool, RequestID: rid, Arguments: json.RawMessage(`{"amount":5}`)})
		if err != nil {
			t.Fatalf("call %s on %s: %v", rid, n.Addr(), err)
		}
		return resp
	}

	// No request_id: refused, nothing reserved.
	if _, err := nodes[0].Runtime().Call(t.Context(), alice, engine.Request{Tool: "pay"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a gated call without request_id: %v", err)
	}
	first1 := call(nodes[0], "pay", "a-1")
	again := call(nodes[2], "pay", "a-1")
	if !first1.Awaiting || !again.Awaiting || again.Record.ExecutionID != first1.Record.ExecutionID || first1.Record.Status != store.StatusAwaitingApproval {
		t.Fatalf("gated call = %+v, retry = %+v", first1, again)
	}
	id := first1.Record.ExecutionID

	t.Run("refusals", func(t *testing.T) {
		_, err := nodes[1].Runtime().Approve(t.Context(), alice, id, "")
		var fe *engine.ForbiddenError
		if !errors.As(err, &fe) {
			t.Fatalf("approval by the caller: %v", err)
		}
		if _, err := nodes[1].Runtime().Approve(t.Context(), carol, id, ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("approval by a non-approver: %v", err)
		}
		if rec, err := nodes[1].Runtime().Store().Get(t.Context(), id); err != nil || rec.Status != store.StatusAwaitingApproval {
			t.Fatalf("after the refusals: %+v, %v", rec, err)
		}
	})

	// The reserving node goes away; the others carry on.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	live := nodes[1:]
	testutil.WaitFor(t, 30*time.Second, "n2 and n3 ready without n1", func() error {
		for _, n := range live {
			if err := n.Runtime().Ready(t.Context()); err != nil {
				return err
			}
		}
		return nil
	})

	t.Run("fifty approvals run it once", func(t *testing.T) {
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			won    []store.Record
			states []store.Status
		)
		for i := range 50 {
			wg.Go(func() {
				rec, err := live[i%2].Runtime().Approve(t.Context(), bob, id, "ok")
				mu.Lock()
				defer mu.Unlock()
				var se *store.StateError
				switch {
				case err == nil:
					won = append(won, rec)
				case errors.As(err, &se) && se.Record.ExecutionID == id:
					states = append(states, se.Record.Status)
				default:
					t.Errorf("approve: %v", err)
				}
			})
		}
		wg.Wait()
		if len(won) != 1 || len(states) != 49 || won[0].Status != store.StatusCompleted || won[0].Decision == nil || won[0].Decision.By != "bob" {
			t.Fatalf("%d won (%+v), %d told the record (%v)", len(won), won, len(states), states)
		}
		if runs.Load() != 1 {
			t.Fatalf("the tool ran %d times, want once", runs.Load())
		}
		for _, n := range live {
			replay := call(n, "pay", "a-1")
			if !replay.Replayed || replay.Record.Status != store.StatusCompleted || string(replay.Record.Data) != string(won[0].Data) {
				t.Fatalf("retry on %s: %+v", n.Addr(), replay)
			}
		}
		if runs.Load() != 1 {
			t.Fatalf("the tool ran %d times after the retries, want once", runs.Load())
		}
	})

	t.Run("deny", func(t *testing.T) {
		d := call(live[0], "pay", "a-2")
		rec, err := live[1].Runtime().Deny(t.Context(), bob, d.Record.ExecutionID, "too much")
		if err != nil || rec.Status != store.StatusDenied {
			t.Fatalf("deny: %+v, %v", rec, err)
		}
		if replay := call(live[0], "pay", "a-2"); !replay.Replayed || replay.Record.Status != store.StatusDenied || replay.Record.ErrorCode() != store.CodeApprovalDenied {
			t.Fatalf("retry after denial: %+v", replay)
		}
	})

	t.Run("expiry", func(t *testing.T) {
		q := call(live[0], "quick", "a-3")
		testutil.WaitFor(t, 15*time.Second, "the gate to expire", func() error {
			rec, err := live[1].Runtime().Store().Get(t.Context(), q.Record.ExecutionID)
			if err != nil {
				return err
			}
			if rec.Status != store.StatusExpired {
				return errors.New(string(rec.Status))
			}
			return nil
		})
		if replay := call(live[1], "quick", "a-3"); !replay.Replayed || replay.Record.ErrorCode() != store.CodeApprovalExpired {
			t.Fatalf("retry after expiry: %+v", replay)
		}
	})
	if runs.Load() != 1 {
		t.Fatalf("the tool ran %d times in all, want once", runs.Load())
	}
}
