package engine_test

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// TestConcurrentApprovalsOnOneNode: fifty approvals of one execution at
// once on one node run its tool once, under a context none of the losing
// approvals cancels; the losers are told the record as it stands, and
// nothing of theirs is left registered on the node (no run, no bytes in
// flight), so it shuts down without waiting.
func TestConcurrentApprovalsOnOneNode(t *testing.T) {
	app := newApp(t)
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "pay", Func: g.fn, Approval: &engine.Approval{Approvers: []string{"bob"}}})
	resp := call(t, app, engine.Request{Tool: "pay", RequestID: "r1", Arguments: json.RawMessage(`{"amount":5}`)})
	if !resp.Awaiting {
		t.Fatalf("the gated call: %+v", resp)
	}
	id := resp.Record.ExecutionID
	bob := engine.Caller{Principal: "bob"}

	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		won   []store.Record
		told  []store.Status
		other []error
	)
	for range 50 {
		wg.Go(func() {
			rec, err := app.Decide(t.Context(), bob, id, store.DecisionApprove, "")
			mu.Lock()
			defer mu.Unlock()
			var se *store.StateError
			switch {
			case err == nil:
				won = append(won, rec)
			case errors.As(err, &se) && se.Record.ExecutionID == id:
				told = append(told, se.Record.Status)
			default:
				other = append(other, err)
			}
		})
	}
	// The winner's tool runs, held by the gate, while the others lose.
	select {
	case <-g.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the approved tool did not start")
	}
	wait.Until(t, 10*time.Second, "49 approvals told the record", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(told)+len(other) == 49
	})
	if n := app.Running(); n != 1 {
		t.Errorf("with the approved tool running, %d executions registered, want 1", n)
	}
	close(g.release)
	wg.Wait()
	if len(won) != 1 || len(told) != 49 || other != nil {
		t.Fatalf("%d approvals won (%+v), %d told the record (%v), others %v", len(won), won, len(told), told, other)
	}
	if won[0].Status != store.StatusCompleted || string(won[0].Data) != `"released"` {
		t.Fatalf("the approved execution: %+v; want completed with the tool's own answer (its run not cancelled)", won[0])
	}
	if n := g.runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
	if n, b := app.Running(), app.InflightBytes(); n != 0 || b != 0 {
		t.Fatalf("after the approvals: %d executions registered, %d bytes in flight; want none", n, b)
	}
}
