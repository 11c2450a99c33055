package fsm_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// quotaExec is an execution whose reservation carries quota.
func quotaExec(id string, quota int) store.Execution {
	ex := execution(id, "n1")
	ex.Quota = quota
	return ex
}

func bobKey(requestID string) store.Key {
	return store.Key{Principal: "bob", Session: "s1", RequestID: requestID}
}

// wantQuotaResponse checks r is the refusal of principal's new identity at
// quota, on the leader and over the wire.
func wantQuotaResponse(t *testing.T, r fsm.Response, principal string, quota int) {
	t.Helper()
	if r.Code != store.CodeCapacity || r.Principal == "" || r.Outcome != 0 {
		t.Fatalf("response %+v, want %s with a principal", r, store.CodeCapacity)
	}
	for side, resp := range map[string]fsm.Response{"leader": r, "follower": overTheWire(t, r)} {
		err := resp.Err()
		var qe *store.QuotaError
		if !errors.As(err, &qe) || qe.Principal != principal || qe.Quota != quota {
			t.Fatalf("%s: Err() = %T %v, want a *store.QuotaError of %q at %d", side, err, err, principal, quota)
		}
		if !errors.Is(err, store.ErrCapacity) || store.CodeOf(err) != "IDEMPOTENCY_CAPACITY" {
			t.Fatalf("%s: Err() = %v (code %q), want it to match ErrCapacity", side, err, store.CodeOf(err))
		}
	}
}

// TestQuotaReserve applies reservations under a quota: the principal's
// new identities are refused at the quota, the rest are answered as ever.
func TestQuotaReserve(t *testing.T) {
	x := newProc(t)
	x.mustOK(fsm.Reserve(key("a1"), fp, quotaExec("e-a1", 2)))
	x.mustOK(fsm.Reserve(key("a2"), fp, quotaExec("e-a2", 2)))
	before := x.snapshot()
	wantQuotaResponse(t, x.apply(fsm.Reserve(key("a3"), fp, quotaExec("e-a3", 2))), "alice", 2)
	if !bytes.Equal(before, x.snapshot()) {
		t.Fatal("a refused reservation changed the state")
	}
	if r := x.mustOK(fsm.Reserve(key("a1"), fp, quotaExec("e-x", 2))); r.Outcome != store.Uncertain {
		t.Fatalf("held identity at the quota: %v, want uncertain", r.Outcome)
	}
	if r := x.mustOK(fsm.Reserve(bobKey("b1"), fp, quotaExec("e-b1", 2))); r.Outcome != store.Reserved {
		t.Fatalf("another principal: %v, want reserved", r.Outcome)
	}
	if got := x.p.State().PrincipalEntries("alice"); got != 2 {
		t.Fatalf("alice holds %d records, want 2", got)
	}
}

func TestQuotaNegativeIsInvalid(t *testing.T) {
	x := newProc(t)
	c := fsm.Reserve(key("a1"), fp, quotaExec("e-a1", -1))
	// The command decodes (a quota is any integer on the wire)...
	got, err := fsm.Decode(mustEncode(t, c))
	if err != nil || got.Execution.Quota != -1 {
		t.Fatalf("Decode = %+v, %v", got, err)
	}
	// ...and every replica refuses it alike when applying it.
	before := x.snapshot()
	r := x.apply(got)
	if r.Code != store.CodeInvalidRequest || !errors.Is(overTheWire(t, r).Err(), store.ErrInvalid) {
		t.Fatalf("negative quota: %+v, want invalid", r)
	}
	if !bytes.Equal(before, x.snapshot()) {
		t.Fatal("a refused reservation changed the state")
	}
}

// TestQuotaSameAfterRestore runs the same entries on a processor that saw
// the whole log and on one restored from a snapshot taken midway: every
// answer and the final state match, quota refusals included. The quota
// comes from each command, not from the replica, so nothing else can
// differ.
func TestQuotaSameAfterRestore(t *testing.T) {
	x := newProc(t)
	x.mustOK(fsm.SetLimits(10, 0))
	x.mustOK(fsm.Reserve(key("a1"), fp, quotaExec("e-a1", 3)))
	x.mustOK(fsm.Reserve(key("a2"), fp, quotaExec("e-a2", 3)))
	x.mustOK(fsm.Complete(key("a1"), fp, completed("e-a1", `1`, t0.Add(time.Minute))))
	x.mustOK(fsm.Reserve(bobKey("b1"), fp, quotaExec("e-b1", 1)))
	restored := mustRestore(t, x.snapshot())

	steps := []struct {
		c fsm.Command
		// quota > 0: the answer is alice's or bob's refusal at it.
		principal string
		quota     int
	}{
		{c: fsm.Reserve(key("a3"), fp, quotaExec("e-a3", 3))},
		{c: fsm.Reserve(key("a4"), fp, quotaExec("e-a4", 3)), principal: "alice", quota: 3},
		{c: fsm.Reserve(bobKey("b2"), fp, quotaExec("e-b2", 1)), principal: "bob", quota: 1},
		{c: fsm.Reserve(key("a1"), fp, quotaExec("e-x1", 3))}, // replay at the quota
		{c: fsm.Expire(t0.Add(2 * time.Minute))},              // a1 goes
		{c: fsm.Reserve(key("a4"), fp, quotaExec("e-a4", 3))},
		{c: fsm.Reserve(key("a5"), fp, quotaExec("e-a5", 3)), principal: "alice", quota: 3},
		{c: fsm.Release("e-b1", true)},
		{c: fsm.Reserve(bobKey("b2"), fp, quotaExec("e-b2", 1))},
	}
	for i, s := range steps {
		x.index++
		// Both apply the same log bytes at the same index.
		c, err := fsm.Decode(mustEncode(t, s.c))
		if err != nil {
			t.Fatal(err)
		}
		a, b := x.p.Apply(x.index, c), restored.Apply(x.index, c)
		if !bytes.Equal(mustJSON(t, a), mustJSON(t, b)) {
			t.Fatalf("step %d (%s): %+v vs %+v", i, s.c.Type, a, b)
		}
		if s.quota > 0 {
			wantQuotaResponse(t, a, s.principal, s.quota)
		} else if err := a.Err(); err != nil {
			t.Fatalf("step %d (%s): %v", i, s.c.Type, err)
		}
	}
	if !restored.Equal(x.p) || !bytes.Equal(mustSnapshot(t, restored), x.snapshot()) {
		t.Fatal("processors diverged")
	}
	for p, n := range map[string]int{"alice": 3, "bob": 1} {
		if a, b := x.p.State().PrincipalEntries(p), restored.State().PrincipalEntries(p); a != n || b != n {
			t.Fatalf("%s holds %d and %d records, want %d", p, a, b, n)
		}
	}
}

func TestQuotaResponseOverTheWire(t *testing.T) {
	r := fsm.Response{Code: store.CodeCapacity, Principal: "planner", Quota: 5}
	b := mustJSON(t, r)
	// The code and its fields, nothing else.
	if want := `{"code":"IDEMPOTENCY_CAPACITY","principal":"planner","quota":5}`; string(b) != want {
		t.Fatalf("wire form %s, want %s", b, want)
	}
	wantQuotaResponse(t, r, "planner", 5)
	// The store-wide bound stays a plain ErrCapacity.
	var qe *store.QuotaError
	if err := overTheWire(t, fsm.Response{Code: store.CodeCapacity}).Err(); err != store.ErrCapacity || errors.As(err, &qe) {
		t.Fatalf("capacity: %v, want ErrCapacity itself", err)
	}
}
