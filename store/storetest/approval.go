package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

// RunApproval runs the conformance cases of approval gates
// (store.Execution.Approval, store.Store.Decide) against stores made by
// newStore. A store that keeps gates runs them besides Run.
func RunApproval(t *testing.T, newStore Factory) {
	cases := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"ApprovalAwaits", testApprovalAwaits},
		{"ApprovalApprove", testApprovalApprove},
		{"ApprovalDeny", testApprovalDeny},
		{"ApprovalExpire", testApprovalExpire},
		{"ApprovalConcurrent", testApprovalConcurrent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newStore)
		})
	}
}

// gated returns an execution with a fresh id, gated until an hour after
// the epoch, approvers bob and carol.
func gated() store.Execution {
	ex := newExec("pay")
	ex.Approval = &store.ApprovalGate{Approvers: []string{"bob", "carol"}, ExpiresAt: epoch.Add(time.Hour),
		Arguments: json.RawMessage(`{"amount":5}`)}
	return ex
}

func decision(kind store.DecisionKind, at time.Duration) store.Decision {
	return store.Decision{Kind: kind, Actor: "bob", Reason: "looks right", At: epoch.Add(at), NodeID: "node-b"}
}

func testApprovalAwaits(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	k := key("g1")
	ex := gated()
	rec := mustReserve(t, s, k, "fp", ex, store.Reserved)
	if rec.Status != store.StatusAwaitingApproval || rec.Approval == nil || !rec.Approval.ExpiresAt.Equal(ex.Approval.ExpiresAt) ||
		len(rec.Approval.Approvers) != 2 || string(rec.Approval.Arguments) != `{"amount":5}` || rec.Decision != nil {
		t.Fatalf("gated reservation = %+v", rec)
	}
	// A retry awaits with it; another fingerprint is a conflict.
	if again := mustReserve(t, s, k, "fp", gated(), store.Awaiting); again.ExecutionID != ex.ID {
		t.Fatalf("retry answered %s, want %s", again.ExecutionID, ex.ID)
	}
	mustReserve(t, s, k, "other", gated(), store.Conflict)
	// Its node's death leaves it alone: it is not running.
	if n, err := s.MarkInterrupted(ctx, ex.NodeID); err != nil || n != 0 {
		t.Fatalf("MarkInterrupted = %d, %v; want 0", n, err)
	}
	// Nothing but a decision settles it.
	_, err := s.Complete(ctx, k, "fp", completed(ex.ID, `1`))
	wantState(t, "complete of an awaiting execution", err, store.StatusAwaitingApproval)
	_, err = s.Cancel(ctx, ex.ID, failedWith(ex.ID, store.StatusCancelled, "CANCELLED"))
	wantState(t, "cancel of an awaiting execution", err, store.StatusAwaitingApproval)
	_, err = s.Release(ctx, ex.ID, true)
	wantState(t, "release of an awaiting execution", err, store.StatusAwaitingApproval)
	if got := mustLookup(t, s, k); got.Status != store.StatusAwaitingApproval {
		t.Fatalf("after the refusals: %s", got.Status)
	}
	// Listed by its status.
	p, err := s.List(ctx, store.ListQuery{AllPrincipals: true, AllSessions: true, Statuses: []store.Status{store.StatusAwaitingApproval}})
	if err != nil || len(p.Records) != 1 || p.Records[0].ExecutionID != ex.ID {
		t.Fatalf("List(awaiting_approval) = %+v, %v", p, err)
	}
	_, err = s.Decide(ctx, "exec_missing", decision(store.DecisionApprove, 0))
	wantErr(t, "decision on an unknown execution", err, store.ErrNotFound)
	_, err = s.Decide(ctx, ex.ID, store.Decision{Kind: "maybe", At: epoch})
	wantErr(t, "unknown decision", err, store.ErrInvalid)
}

func testApprovalApprove(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	k := key("g2")
	ex := gated()
	held := mustReserve(t, s, k, "fp", ex, store.Reserved)
	rec, err := s.Decide(ctx, ex.ID, decision(store.DecisionApprove, time.Minute))
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	if rec.Status != store.StatusRunning || rec.NodeID != "node-b" || rec.Seq <= held.Seq || rec.ExecutionID != ex.ID ||
		rec.Decision == nil || rec.Decision.Status != store.StatusRunning || rec.Decision.By != "bob" || rec.Decision.Reason != "looks right" ||
		!rec.Decision.At.Equal(epoch.Add(time.Minute)) {
		t.Fatalf("approved record = %+v (decision %+v)", rec, rec.Decision)
	}
	// A second decision sees it running.
	_, err = s.Decide(ctx, ex.ID, decision(store.DecisionDeny, 2*time.Minute))
	wantState(t, "deny after approve", err, store.StatusRunning)
	// A retry is an ordinary one of a running execution.
	mustReserve(t, s, k, "fp", gated(), store.Uncertain)
	// The reserving node's death is not the runner's: nothing changes.
	if n, err := s.MarkInterrupted(ctx, ex.NodeID); err != nil || n != 0 {
		t.Fatalf("MarkInterrupted(reserving node) = %d, %v; want 0", n, err)
	}
	done := mustComplete(t, s, k, "fp", completed(ex.ID, `{"paid":true}`))
	if done.Status != store.StatusCompleted || done.Decision == nil || done.Approval == nil {
		t.Fatalf("completed record = %+v", done)
	}
	mustReserve(t, s, k, "fp", gated(), store.Replay)

	// An approved execution whose runner died is interrupted, never run
	// again.
	k2, ex2 := key("g2b"), gated()
	mustReserve(t, s, k2, "fp", ex2, store.Reserved)
	if _, err := s.Decide(ctx, ex2.ID, decision(store.DecisionApprove, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.MarkInterrupted(ctx, "node-b"); err != nil || n != 1 {
		t.Fatalf("MarkInterrupted(runner) = %d, %v; want 1", n, err)
	}
	mustReserve(t, s, k2, "fp", gated(), store.Uncertain)
}

func testApprovalDeny(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	k := key("g3")
	ex := gated()
	mustReserve(t, s, k, "fp", ex, store.Reserved)
	rec, err := s.Decide(ctx, ex.ID, decision(store.DecisionDeny, time.Minute))
	if err != nil || rec.Status != store.StatusDenied || !rec.FinishedAt.Equal(epoch.Add(time.Minute)) ||
		rec.Decision == nil || rec.Decision.Status != store.StatusDenied || rec.Decision.By != "bob" {
		t.Fatalf("deny = %+v, %v", rec, err)
	}
	if rec.ErrorCode() != store.CodeApprovalDenied {
		t.Fatalf("denied record's error %s", rec.Error)
	}
	replay := mustReserve(t, s, k, "fp", gated(), store.Replay)
	if replay.Status != store.StatusDenied || replay.ExecutionID != ex.ID {
		t.Fatalf("replay = %+v", replay)
	}
	_, err = s.Decide(ctx, ex.ID, decision(store.DecisionApprove, 2*time.Minute))
	wantState(t, "approve after deny", err, store.StatusDenied)
	// A denied record may not be completed either.
	_, err = s.Complete(ctx, k, "fp", completed(ex.ID, `1`))
	wantState(t, "complete after deny", err, store.StatusDenied)
}

func testApprovalExpire(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	k := key("g4")
	ex := gated()
	mustReserve(t, s, k, "fp", ex, store.Reserved)
	// Not before its time.
	_, err := s.Decide(ctx, ex.ID, decision(store.DecisionExpire, time.Hour-time.Nanosecond))
	wantState(t, "expire before the gate expires", err, store.StatusAwaitingApproval)
	rec, err := s.Decide(ctx, ex.ID, store.Decision{Kind: store.DecisionExpire, Actor: "node-a", At: epoch.Add(time.Hour)})
	if err != nil || rec.Status != store.StatusExpired || rec.ErrorCode() != store.CodeApprovalExpired {
		t.Fatalf("expire = %+v, %v", rec, err)
	}
	mustReserve(t, s, k, "fp", gated(), store.Replay)

	// An approval at or after the gate's expiry expires it instead.
	k2, ex2 := key("g4b"), gated()
	mustReserve(t, s, k2, "fp", ex2, store.Reserved)
	rec, err = s.Decide(ctx, ex2.ID, decision(store.DecisionApprove, time.Hour))
	if err != nil || rec.Status != store.StatusExpired || rec.Decision == nil || rec.Decision.Status != store.StatusExpired {
		t.Fatalf("late approve = %+v, %v", rec, err)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Error, &body); err != nil || body["code"] != store.CodeApprovalExpired {
		t.Fatalf("expired error %s", rec.Error)
	}
}

func testApprovalConcurrent(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	k := key("g5")
	ex := gated()
	mustReserve(t, s, k, "fp", ex, store.Reserved)
	const n = 50
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		won      int
		lostSeen = map[store.Status]int{}
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := decision(store.DecisionApprove, time.Minute)
			if i%2 == 1 {
				d.NodeID = "node-c"
			}
			rec, err := s.Decide(ctx, ex.ID, d)
			mu.Lock()
			defer mu.Unlock()
			var se *store.StateError
			switch {
			case err == nil && rec.Status == store.StatusRunning:
				won++
			case errors.As(err, &se) && se.Record.ExecutionID == ex.ID:
				lostSeen[se.Record.Status]++
			default:
				t.Errorf("approve: %+v, %v", rec, err)
			}
		}()
	}
	wg.Wait()
	if won != 1 || lostSeen[store.StatusRunning] != n-1 {
		t.Fatalf("%d approvals won, losers saw %v; want 1 and %d running", won, lostSeen, n-1)
	}
}
