package fsm_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

func TestReserveReservesAtTheLogIndex(t *testing.T) {
	p := fsm.NewProcessor()
	exec := execution("e1", "n1")
	r := p.Apply(7, fsm.Reserve(key("r1"), fp, exec))
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if r.Outcome != store.Reserved {
		t.Fatalf("outcome %v, want reserved", r.Outcome)
	}
	want := store.Record{
		ExecutionID: "e1", Key: key("r1"), Tool: exec.Tool, Fingerprint: fp,
		Status: store.StatusRunning, NodeID: "n1", StartedAt: t0, Seq: 7,
	}
	if !sameRecord(t, r.Record, want) {
		t.Fatalf("record %+v, want %+v", r.Record, want)
	}
	if got := p.State().LastSeq(); got != 7 {
		t.Fatalf("LastSeq %d, want 7", got)
	}
	if got, err := p.State().Get("e1"); err != nil || !sameRecord(t, got, want) {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	if got, err := p.State().Lookup(key("r1")); err != nil || got.ExecutionID != "e1" {
		t.Fatalf("Lookup: %+v, %v", got, err)
	}
}

func TestReserveOutcomes(t *testing.T) {
	x := newProc(t)
	first := x.mustReserve("r1", "e1", "n1")

	// Same identity and fingerprint while running: uncertain, with the
	// record as it stands; nothing changes.
	before := x.snapshot()
	r := x.mustOK(fsm.Reserve(key("r1"), fp, execution("e2", "n2")))
	if r.Outcome != store.Uncertain || !sameRecord(t, r.Record, first) {
		t.Fatalf("running: %v %+v, want uncertain with the first record", r.Outcome, r.Record)
	}
	// Different fingerprint: conflict, whatever the status.
	r = x.mustOK(fsm.Reserve(key("r1"), "fp-other", execution("e3", "n1")))
	if r.Outcome != store.Conflict || r.Record.ExecutionID != "e1" {
		t.Fatalf("conflict: %v %+v", r.Outcome, r.Record)
	}
	if !bytes.Equal(before, x.snapshot()) {
		t.Fatal("an answered reservation changed the state")
	}

	// Interrupted: still uncertain.
	x.mustOK(fsm.Interrupt("n1"))
	r = x.mustOK(fsm.Reserve(key("r1"), fp, execution("e4", "n1")))
	if r.Outcome != store.Uncertain || r.Record.Status != store.StatusInterrupted {
		t.Fatalf("interrupted: %v %+v", r.Outcome, r.Record)
	}

	// Finished: the recorded result is replayed, same execution id.
	x.mustOK(fsm.Complete(key("r1"), fp, completed("e1", `{"ok":true}`, t0.Add(time.Minute))))
	r = x.mustOK(fsm.Reserve(key("r1"), fp, execution("e5", "n2")))
	if r.Outcome != store.Replay || r.Record.ExecutionID != "e1" || string(r.Record.Data) != `{"ok":true}` {
		t.Fatalf("finished: %v %+v", r.Outcome, r.Record)
	}
	if r.Record.Seq != first.Seq {
		t.Fatalf("replay seq %d, want the reservation's %d", r.Record.Seq, first.Seq)
	}
	r = x.mustOK(fsm.Reserve(key("r1"), "fp-other", execution("e6", "n2")))
	if r.Outcome != store.Conflict {
		t.Fatalf("finished, other fingerprint: %v", r.Outcome)
	}
	if got := x.p.State().LastSeq(); got != first.Seq {
		t.Fatalf("LastSeq %d moved without a reservation (want %d)", got, first.Seq)
	}
	if x.p.State().Len() != 1 {
		t.Fatalf("Len %d, want 1", x.p.State().Len())
	}
}

func TestReserveRefusesInvalid(t *testing.T) {
	x := newProc(t)
	x.mustReserve("r1", "e1", "n1")
	for name, c := range map[string]fsm.Command{
		"execution id in use": fsm.Reserve(key("r2"), fp, execution("e1", "n1")),
		"empty request id":    fsm.Reserve(key(""), fp, execution("e2", "n1")),
		"empty fingerprint":   fsm.Reserve(key("r2"), "", execution("e2", "n1")),
		"empty execution id":  fsm.Reserve(key("r2"), fp, execution("", "n1")),
	} {
		before := x.snapshot()
		r := x.apply(c)
		if !errors.Is(r.Err(), store.ErrInvalid) || r.Code != store.CodeInvalidRequest {
			t.Errorf("%s: %+v, want invalid", name, r)
		}
		if !bytes.Equal(before, x.snapshot()) {
			t.Errorf("%s: a refused reservation changed the state", name)
		}
	}

	// An index that does not grow (a replayed or reordered entry) is
	// refused rather than given a duplicate fencing token.
	p := fsm.NewProcessor()
	p.Apply(5, fsm.Reserve(key("a"), fp, execution("ea", "n1")))
	for _, idx := range []uint64{5, 4} {
		r := p.Apply(idx, fsm.Reserve(key("b"), fp, execution("eb", "n1")))
		if !errors.Is(r.Err(), store.ErrInvalid) {
			t.Fatalf("index %d after 5: %+v, want invalid", idx, r)
		}
	}
}

func TestCompleteByTheOwner(t *testing.T) {
	x := newProc(t)
	rec := x.mustReserve("r1", "e1", "n1")
	res := completed("e1", `{"order_id":7}`, t0.Add(time.Second))
	r := x.mustOK(fsm.Complete(key("r1"), fp, res))
	if r.Record.Status != store.StatusCompleted || string(r.Record.Data) != `{"order_id":7}` ||
		!r.Record.FinishedAt.Equal(res.FinishedAt) || r.Record.Seq != rec.Seq || r.Record.Resolved {
		t.Fatalf("completed record %+v", r.Record)
	}
	if got := x.mustGet("e1"); !sameRecord(t, got, r.Record) {
		t.Fatalf("stored %+v, answered %+v", got, r.Record)
	}

	// A retry of the same complete is refused with the record as it stands.
	r = x.apply(fsm.Complete(key("r1"), fp, completed("e1", `{"order_id":8}`, t0.Add(time.Hour))))
	var se *store.StateError
	if !errors.As(r.Err(), &se) || !errors.Is(r.Err(), store.ErrInvalidState) {
		t.Fatalf("second complete: %v, want a *StateError", r.Err())
	}
	if string(se.Record.Data) != `{"order_id":7}` || se.Op != "complete" {
		t.Fatalf("state error %+v", se)
	}
}

func TestCompleteRefusedForAnotherExecution(t *testing.T) {
	x := newProc(t)
	rec := x.mustReserve("r1", "e1", "n1")
	before := x.snapshot()
	r := x.apply(fsm.Complete(key("r1"), fp, completed("e-late", `1`, t0.Add(time.Second))))
	err := r.Err()
	var se *store.StateError
	if !errors.As(err, &se) || !errors.Is(err, store.ErrInvalidState) {
		t.Fatalf("complete by another execution: %v, want a *StateError", err)
	}
	if !sameRecord(t, se.Record, rec) {
		t.Fatalf("state error carries %+v, want %+v", se.Record, rec)
	}
	if r.Code != store.CodeInvalidState {
		t.Fatalf("code %q", r.Code)
	}
	if !bytes.Equal(before, x.snapshot()) {
		t.Fatal("a refused complete changed the state")
	}
}

func TestCompleteOtherRefusals(t *testing.T) {
	x := newProc(t)
	x.mustReserve("r1", "e1", "n1")
	cases := []struct {
		name string
		c    fsm.Command
		want error
	}{
		{"unknown identity", fsm.Complete(key("nope"), fp, completed("e1", `1`, t0)), store.ErrNotFound},
		{"other fingerprint", fsm.Complete(key("r1"), "fp-other", completed("e1", `1`, t0)), store.ErrConflict},
		{"open status", fsm.Complete(key("r1"), fp, store.Result{ExecutionID: "e1", Status: store.StatusRunning, FinishedAt: t0}), store.ErrInvalid},
		{"no finish time", fsm.Complete(key("r1"), fp, completed("e1", `1`, time.Time{})), store.ErrInvalid},
		{"invalid data", fsm.Complete(key("r1"), fp, completed("e1", `{`, t0)), store.ErrInvalid},
		{"failed without error object", fsm.Complete(key("r1"), fp, store.Result{ExecutionID: "e1", Status: store.StatusFailed, Error: []byte(`"x"`), FinishedAt: t0}), store.ErrInvalid},
	}
	for _, tc := range cases {
		before := x.snapshot()
		r := x.apply(tc.c)
		if !errors.Is(r.Err(), tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, r.Err(), tc.want)
		}
		if !bytes.Equal(before, x.snapshot()) {
			t.Errorf("%s: a refused complete changed the state", tc.name)
		}
	}
	var ce *store.ConflictError
	r := x.apply(fsm.Complete(key("r1"), "fp-other", completed("e1", `1`, t0)))
	if !errors.As(r.Err(), &ce) || ce.Record.ExecutionID != "e1" {
		t.Fatalf("conflict: %v", r.Err())
	}
}

// A runner whose node was declared dead may still finish: its result is
// recorded (docs/guarantees.md, "Interrupted means the runner is gone").
func TestCompleteOfAnInterruptedExecution(t *testing.T) {
	x := newProc(t)
	x.mustReserve("r1", "e1", "n1")
	x.mustOK(fsm.Interrupt("n1"))
	r := x.mustOK(fsm.Complete(key("r1"), fp, failedWith("e1", store.StatusTimedOut, "TIMEOUT", t0.Add(time.Second))))
	if r.Record.Status != store.StatusTimedOut || r.Record.ErrorCode() != "TIMEOUT" {
		t.Fatalf("record %+v", r.Record)
	}
}

func TestCapacity(t *testing.T) {
	x := newProc(t)
	if got := x.p.State().Capacity(); got != fsm.DefaultCapacity {
		t.Fatalf("capacity before any capacity command: %d, want %d", got, fsm.DefaultCapacity)
	}
	if x.p.CapacitySet() {
		t.Fatal("CapacitySet before any capacity command")
	}
	r := x.mustOK(fsm.SetLimits(2, 0))
	if r.Outcome != 0 || r.Count != 0 {
		t.Fatalf("capacity response %+v", r)
	}
	if !x.p.CapacitySet() {
		t.Fatal("CapacitySet false after a capacity command")
	}
	x.mustReserve("r1", "e1", "n1")
	x.mustReserve("r2", "e2", "n1")
	before := x.snapshot()
	r = x.apply(fsm.Reserve(key("r3"), fp, execution("e3", "n1")))
	if !errors.Is(r.Err(), store.ErrCapacity) || r.Code != store.CodeCapacity || r.Outcome != 0 {
		t.Fatalf("third reserve: %+v, want capacity", r)
	}
	if !bytes.Equal(before, x.snapshot()) {
		t.Fatal("a refused reservation changed the state")
	}

	// A full store still answers for the identities it holds.
	if r := x.mustOK(fsm.Reserve(key("r1"), fp, execution("e4", "n1"))); r.Outcome != store.Uncertain {
		t.Fatalf("held identity when full: %v", r.Outcome)
	}
	if r := x.mustOK(fsm.Reserve(key("r2"), "fp-other", execution("e4", "n1"))); r.Outcome != store.Conflict {
		t.Fatalf("held identity, other fingerprint, when full: %v", r.Outcome)
	}

	// Zero and negative capacities are refused and change nothing.
	for _, n := range []int{0, -1} {
		r := x.apply(fsm.SetLimits(n, 0))
		if !errors.Is(r.Err(), store.ErrInvalid) {
			t.Fatalf("SetLimits(%d, 0): %+v, want invalid", n, r)
		}
		if got := x.p.State().Capacity(); got != 2 {
			t.Fatalf("capacity %d after a refused SetLimits(%d, 0)", got, n)
		}
	}
	fresh := newProc(t)
	if fresh.apply(fsm.SetLimits(0, 0)); fresh.p.CapacitySet() {
		t.Fatal("a refused capacity command set the capacity")
	}

	// Lowering the bound evicts nothing; room comes back when records go.
	x.mustOK(fsm.SetLimits(1, 0))
	if got := x.p.State().Len(); got != 2 {
		t.Fatalf("Len %d after lowering the capacity, want 2", got)
	}
	x.mustOK(fsm.Release("e1", true))
	if r := x.apply(fsm.Reserve(key("r3"), fp, execution("e3", "n1"))); !errors.Is(r.Err(), store.ErrCapacity) {
		t.Fatalf("reserve at 1 of 1: %+v", r)
	}
	x.mustOK(fsm.Release("e2", true))
	x.mustReserve("r3", "e3", "n1")
}

func TestCancel(t *testing.T) {
	x := newProc(t)
	x.mustReserve("r1", "e1", "n1")
	r := x.mustOK(fsm.Cancel("e1", cancelled("e1", t0.Add(time.Second))))
	if r.Record.Status != store.StatusCancelled || r.Record.ErrorCode() != "CANCELLED" {
		t.Fatalf("cancelled record %+v", r.Record)
	}
	// Whatever the tool returns afterwards is discarded.
	r = x.apply(fsm.Complete(key("r1"), fp, completed("e1", `1`, t0.Add(time.Minute))))
	if !errors.Is(r.Err(), store.ErrInvalidState) || r.Record.Status != store.StatusCancelled {
		t.Fatalf("complete after cancel: %+v", r)
	}
	// Cancel of a finished execution.
	r = x.apply(fsm.Cancel("e1", cancelled("e1", t0.Add(time.Hour))))
	if !errors.Is(r.Err(), store.ErrInvalidState) || !r.Record.FinishedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("second cancel: %+v", r)
	}

	x.mustReserve("r2", "e2", "n2")
	x.mustOK(fsm.Interrupt("n2"))
	x.mustReserve("r3", "e3", "n1")
	for name, tc := range map[string]struct {
		c    fsm.Command
		want error
	}{
		"interrupted":      {fsm.Cancel("e2", cancelled("e2", t0)), store.ErrInvalidState},
		"unknown":          {fsm.Cancel("nope", cancelled("nope", t0)), store.ErrNotFound},
		"not cancelled":    {fsm.Cancel("e3", completed("e3", `1`, t0)), store.ErrInvalid},
		"other execution":  {fsm.Cancel("e3", cancelled("e1", t0)), store.ErrInvalid},
		"invalid result":   {fsm.Cancel("e3", cancelled("e3", time.Time{})), store.ErrInvalid},
		"empty identifier": {fsm.Cancel("", cancelled("", t0)), store.ErrInvalid},
	} {
		before := x.snapshot()
		if r := x.apply(tc.c); !errors.Is(r.Err(), tc.want) {
			t.Errorf("%s: %v, want %v", name, r.Err(), tc.want)
		}
		if !bytes.Equal(before, x.snapshot()) {
			t.Errorf("%s: a refused cancel changed the state", name)
		}
	}
}

func TestResolve(t *testing.T) {
	x := newProc(t)
	x.mustReserve("r1", "e1", "n1")
	x.mustReserve("r2", "e2", "n2")
	x.mustOK(fsm.Interrupt("n1"))

	r := x.mustOK(fsm.Resolve("e1", store.Resolution{Result: completed("e1", `{"found":true}`, t0.Add(time.Hour))}))
	if r.Record.Status != store.StatusCompleted || !r.Record.Resolved || string(r.Record.Data) != `{"found":true}` {
		t.Fatalf("resolved record %+v", r.Record)
	}
	if got := x.mustGet("e1"); !got.Resolved {
		t.Fatal("stored record is not marked resolved")
	}
	// Resolved once, never again.
	r = x.apply(fsm.Resolve("e1", store.Resolution{Result: failedWith("e1", store.StatusFailed, "X", t0.Add(2*time.Hour))}))
	if !errors.Is(r.Err(), store.ErrInvalidState) {
		t.Fatalf("second resolve: %+v", r)
	}

	// A running execution needs AllowRunning.
	r = x.apply(fsm.Resolve("e2", store.Resolution{Result: failedWith("e2", store.StatusFailed, "GONE", t0.Add(time.Hour))}))
	var se *store.StateError
	if !errors.As(r.Err(), &se) || se.Op != "resolve" || se.Record.Status != store.StatusRunning {
		t.Fatalf("resolve running without AllowRunning: %v", r.Err())
	}
	r = x.mustOK(fsm.Resolve("e2", store.Resolution{
		Result:       failedWith("e2", store.StatusFailed, "GONE", t0.Add(time.Hour)),
		AllowRunning: true,
	}))
	if r.Record.Status != store.StatusFailed || !r.Record.Resolved || r.Record.ErrorCode() != "GONE" {
		t.Fatalf("resolved running record %+v", r.Record)
	}

	x.mustReserve("r3", "e3", "n3")
	x.mustOK(fsm.Interrupt("n3"))
	for name, tc := range map[string]struct {
		c    fsm.Command
		want error
	}{
		"timed_out outcome": {fsm.Resolve("e3", store.Resolution{Result: failedWith("e3", store.StatusTimedOut, "T", t0)}), store.ErrInvalid},
		"cancelled outcome": {fsm.Resolve("e3", store.Resolution{Result: cancelled("e3", t0)}), store.ErrInvalid},
		"other execution":   {fsm.Resolve("e3", store.Resolution{Result: completed("e1", `1`, t0)}), store.ErrInvalid},
		"unknown":           {fsm.Resolve("nope", store.Resolution{Result: completed("nope", `1`, t0)}), store.ErrNotFound},
		"invalid result":    {fsm.Resolve("e3", store.Resolution{Result: completed("e3", ``, t0)}), store.ErrInvalid},
	} {
		before := x.snapshot()
		if r := x.apply(tc.c); !errors.Is(r.Err(), tc.want) {
			t.Errorf("%s: %v, want %v", name, r.Err(), tc.want)
		}
		if !bytes.Equal(before, x.snapshot()) {
			t.Errorf("%s: a refused resolve changed the state", name)
		}
	}
}

func TestRelease(t *testing.T) {
	x := newProc(t)
	first := x.mustReserve("r1", "e1", "n1")
	x.mustReserve("r2", "e2", "n2")
	x.mustOK(fsm.Interrupt("n2"))

	// Running, without allowRunning: refused.
	r := x.apply(fsm.Release("e1", false))
	if !errors.Is(r.Err(), store.ErrInvalidState) || r.Record.Status != store.StatusRunning {
		t.Fatalf("release running: %+v", r)
	}
	// Interrupted: released, the removed record returned.
	r = x.mustOK(fsm.Release("e2", false))
	if r.Record.ExecutionID != "e2" || r.Record.Status != store.StatusInterrupted {
		t.Fatalf("released record %+v", r.Record)
	}
	if _, err := x.p.State().Get("e2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("released record still there: %v", err)
	}
	// Running with allowRunning: the runner giving back a never-run
	// reservation.
	r = x.mustOK(fsm.Release("e1", true))
	if !sameRecord(t, r.Record, first) {
		t.Fatalf("released %+v, want %+v", r.Record, first)
	}
	if r := x.apply(fsm.Release("e1", true)); !errors.Is(r.Err(), store.ErrNotFound) {
		t.Fatalf("second release: %+v", r)
	}

	// The identity is free again: the next call reserves anew, and the
	// released runner can no longer complete it.
	second := x.mustReserve("r1", "e1b", "n2")
	if second.Seq <= first.Seq {
		t.Fatalf("new reservation seq %d not above %d", second.Seq, first.Seq)
	}
	r = x.apply(fsm.Complete(key("r1"), fp, completed("e1", `1`, t0.Add(time.Second))))
	var se *store.StateError
	if !errors.As(r.Err(), &se) || se.Record.ExecutionID != "e1b" {
		t.Fatalf("late complete of a released execution: %v", r.Err())
	}

	// Finished records are never released.
	x.mustOK(fsm.Complete(key("r1"), fp, completed("e1b", `2`, t0.Add(time.Second))))
	for _, allow := range []bool{false, true} {
		if r := x.apply(fsm.Release("e1b", allow)); !errors.Is(r.Err(), store.ErrInvalidState) {
			t.Fatalf("release of a finished record (allowRunning=%v): %+v", allow, r)
		}
	}
}

func TestInterrupt(t *testing.T) {
	x := newProc(t)
	x.mustReserve("a", "ea", "n1")
	x.mustReserve("b", "eb", "n1")
	x.mustReserve("c", "ec", "n2")
	x.mustReserve("d", "ed", "n1")
	x.mustOK(fsm.Complete(key("d"), fp, completed("ed", `1`, t0)))

	if r := x.mustOK(fsm.Interrupt("n1")); r.Count != 2 {
		t.Fatalf("interrupted %d, want 2", r.Count)
	}
	for id, want := range map[string]store.Status{
		"ea": store.StatusInterrupted, "eb": store.StatusInterrupted,
		"ec": store.StatusRunning, "ed": store.StatusCompleted,
	} {
		if got := x.mustGet(id).Status; got != want {
			t.Errorf("%s: %s, want %s", id, got, want)
		}
	}
	if r := x.mustOK(fsm.Interrupt("n1")); r.Count != 0 {
		t.Fatalf("second interrupt marked %d", r.Count)
	}
	if r := x.mustOK(fsm.Interrupt("n-unknown")); r.Count != 0 {
		t.Fatalf("interrupt of an unknown node marked %d", r.Count)
	}
}

func TestExpire(t *testing.T) {
	x := newProc(t)
	cutoff := t0.Add(time.Hour)
	x.mustReserve("running", "e-running", "n1")
	x.mustReserve("interrupted", "e-interrupted", "n2")
	x.mustOK(fsm.Interrupt("n2"))
	x.mustReserve("old", "e-old", "n1")
	x.mustOK(fsm.Complete(key("old"), fp, completed("e-old", `1`, t0)))
	x.mustReserve("old-cancel", "e-old-cancel", "n1")
	x.mustOK(fsm.Cancel("e-old-cancel", cancelled("e-old-cancel", cutoff.Add(-time.Nanosecond))))
	x.mustReserve("at-cutoff", "e-at-cutoff", "n1")
	x.mustOK(fsm.Complete(key("at-cutoff"), fp, failedWith("e-at-cutoff", store.StatusFailed, "X", cutoff)))
	x.mustReserve("new", "e-new", "n1")
	x.mustOK(fsm.Complete(key("new"), fp, completed("e-new", `2`, cutoff.Add(time.Hour))))

	// Running and interrupted records are never removed, however far the
	// cutoff.
	if r := x.mustOK(fsm.Expire(t0.Add(-time.Hour))); r.Count != 0 {
		t.Fatalf("expire before every finish removed %d", r.Count)
	}
	if r := x.mustOK(fsm.Expire(cutoff)); r.Count != 2 {
		t.Fatalf("expired %d, want 2", r.Count)
	}
	for _, id := range []string{"e-old", "e-old-cancel"} {
		if _, err := x.p.State().Get(id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v, want expired", id, err)
		}
	}
	for _, id := range []string{"e-running", "e-interrupted", "e-at-cutoff", "e-new"} {
		x.mustGet(id)
	}
	if r := x.mustOK(fsm.Expire(cutoff.Add(100 * 365 * 24 * time.Hour))); r.Count != 2 {
		t.Fatalf("far expire removed %d, want the 2 finished records", r.Count)
	}
	if got := x.p.State().Len(); got != 2 {
		t.Fatalf("Len %d, want the running and the interrupted record", got)
	}
	// An expired identity is vacant: the next call runs the tool again.
	if r := x.mustOK(fsm.Reserve(key("old"), fp, execution("e-old-2", "n1"))); r.Outcome != store.Reserved {
		t.Fatalf("reserve after expiry: %v", r.Outcome)
	}
}

func TestNodeTable(t *testing.T) {
	x := newProc(t)
	if got := x.p.Nodes(); len(got) != 0 {
		t.Fatalf("empty processor has nodes %+v", got)
	}
	a := fsm.NodeInfo{ID: "a", RaftAddr: "10.0.0.1:7000", HTTPAddr: "10.0.0.1:8080"}
	b := fsm.NodeInfo{ID: "b", RaftAddr: "10.0.0.2:7000", HTTPAddr: "10.0.0.2:8080", GossipAddr: "10.0.0.2:7946"}
	c := fsm.NodeInfo{ID: "c", RaftAddr: "10.0.0.3:7000", HTTPAddr: "10.0.0.3:8080"}
	for _, n := range []fsm.NodeInfo{c, a, b} {
		if r := x.mustOK(fsm.SetNode(n)); string(mustJSON(t, r)) != `{}` {
			t.Fatalf("set node response %+v", r)
		}
	}
	if got := x.p.Nodes(); len(got) != 3 || got[0] != a || got[1] != b || got[2] != c {
		t.Fatalf("Nodes() = %+v, want a, b, c", got)
	}

	b2 := fsm.NodeInfo{ID: "b", RaftAddr: "10.0.0.9:7000", HTTPAddr: "10.0.0.9:8080"}
	x.mustOK(fsm.SetNode(b2))
	if got, ok := x.p.Node("b"); !ok || got != b2 {
		t.Fatalf("Node(b) = %+v, %v, want the replacement", got, ok)
	}
	if got := x.p.Nodes(); len(got) != 3 {
		t.Fatalf("a replacement added a member: %+v", got)
	}

	x.mustOK(fsm.RemoveNode("c"))
	if _, ok := x.p.Node("c"); ok {
		t.Fatal("removed node still known")
	}
	x.mustOK(fsm.RemoveNode("c"))
	x.mustOK(fsm.RemoveNode("never"))
	if got := x.p.Nodes(); len(got) != 2 || got[0] != a || got[1] != b2 {
		t.Fatalf("Nodes() = %+v, want a, b", got)
	}
	// The member table is not the record table.
	if x.p.State().Len() != 0 {
		t.Fatal("node commands created records")
	}
}

func TestApplyUnknownType(t *testing.T) {
	x := newProc(t)
	before := x.snapshot()
	r := x.apply(fsm.Command{Type: "explode"})
	if r.Code != store.CodeInvalidRequest || !errors.Is(r.Err(), store.ErrInvalid) {
		t.Fatalf("unknown type: %+v", r)
	}
	if !bytes.Equal(before, x.snapshot()) {
		t.Fatal("an unknown command changed the state")
	}
}
