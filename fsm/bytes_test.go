package fsm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// tDone is when the executions of these tests finish.
var tDone = t0.Add(time.Minute)

// recomputed is RecordSize summed over a processor's records: in all, and
// per principal.
func recomputed(p *fsm.Processor) (int64, map[string]int64) {
	per := make(map[string]int64)
	var all int64
	for _, r := range p.State().Records() {
		n := store.RecordSize(r)
		all += n
		per[r.Key.Principal] += n
	}
	return all, per
}

// wantAccounted checks that p's byte counters are RecordSize summed over
// its records.
func wantAccounted(t *testing.T, what string, p *fsm.Processor) {
	t.Helper()
	all, per := recomputed(p)
	st := p.State()
	if st.Bytes() != all {
		t.Fatalf("%s: Bytes() = %d, want %d", what, st.Bytes(), all)
	}
	for principal, n := range per {
		if got := st.PrincipalBytes(principal); got != n {
			t.Fatalf("%s: PrincipalBytes(%s) = %d, want %d", what, principal, got, n)
		}
	}
}

// byteQuotaLog is a log that exercises every command that changes a
// record's bytes, under a cluster-wide bound and per-principal quotas,
// including a reservation refused for bytes and an outcome that does not
// fit (recorded as a bounded failure).
func byteQuotaLog() []fsm.Command {
	const quota = 1500
	big := `"` + strings.Repeat("x", 1200) + `"`
	withQuota := func(id string) store.Execution {
		ex := execution(id, "n1")
		ex.ByteQuota, ex.Headroom = quota, 100
		return ex
	}
	res := func(r store.Result) *store.Result {
		r.ByteQuota = quota
		return &r
	}
	return []fsm.Command{
		fsm.SetLimits(100, 1<<20),
		fsm.Reserve(key("a1"), fp, withQuota("e-a1")),
		fsm.Complete(key("a1"), fp, *res(completed("e-a1", `{"order_id":1}`, tDone))),
		fsm.Reserve(key("a2"), fp, withQuota("e-a2")),
		fsm.Reserve(key("a3"), fp, withQuota("e-a3")),
		fsm.Complete(key("a2"), fp, *res(completed("e-a2", big, tDone))), // over alice's quota: a bounded failure
		fsm.Reserve(key("a4"), fp, withQuota("e-a4")),                    // refused for bytes, or not, alike everywhere
		fsm.Reserve(bobKey("b1"), fp, withQuota("e-b1")),
		fsm.Complete(bobKey("b1"), fp, *res(completed("e-b1", big, tDone))), // within bob's quota
		fsm.Reserve(bobKey("b2"), fp, withQuota("e-b2")),
		fsm.Cancel("e-b2", cancelled("e-b2", tDone)),
		fsm.Interrupt("n1"),
		fsm.Resolve("e-a3", store.Resolution{Result: *res(completed("e-a3", `{"resolved":true}`, tDone))}),
		fsm.Reserve(bobKey("b3"), fp, withQuota("e-b3")),
		fsm.Interrupt("n1"),
		fsm.Release("e-b3", false),
		fsm.Expire(tDone.Add(-1)),
	}
}

// TestByteAccountingReplicates applies one log on a leader and, through
// the log's bytes, on a follower, and restores a third from the leader's
// snapshot: all three account the same bytes, per principal and in all,
// equal to RecordSize summed over their records, after every entry.
func TestByteAccountingReplicates(t *testing.T) {
	leader, follower := newProc(t), newProc(t)
	for i, c := range byteQuotaLog() {
		want := leader.apply(c)
		decoded, err := fsm.Decode(mustEncode(t, c))
		if err != nil {
			t.Fatal(err)
		}
		got := follower.apply(decoded)
		if want.Code != got.Code || want.Outcome != got.Outcome {
			t.Fatalf("entry %d (%s): leader %+v, follower %+v", i, c.Type, want, got)
		}
		wantAccounted(t, "leader", leader.p)
		wantAccounted(t, "follower", follower.p)
		if !leader.p.Equal(follower.p) {
			t.Fatalf("entry %d (%s): the follower's state differs", i, c.Type)
		}
		restored := mustRestore(t, leader.snapshot())
		if !restored.Equal(leader.p) || restored.State().Bytes() != leader.p.State().Bytes() {
			t.Fatalf("entry %d (%s): restored %d bytes, leader %d", i, c.Type, restored.State().Bytes(), leader.p.State().Bytes())
		}
	}
	st := leader.p.State()
	if st.MaxBytes() != 1<<20 || st.Bytes() == 0 || st.PrincipalBytes("alice") == 0 || st.PrincipalBytes("bob") == 0 {
		t.Fatalf("MaxBytes %d, Bytes %d, alice %d, bob %d", st.MaxBytes(), st.Bytes(), st.PrincipalBytes("alice"), st.PrincipalBytes("bob"))
	}
	// The outcome over alice's quota is a failure naming her, without data.
	a2 := leader.mustGet("e-a2")
	if a2.Status != store.StatusFailed || a2.Data != nil || a2.ErrorCode() != store.CodeCapacity || !strings.Contains(string(a2.Error), `"principal":"alice"`) {
		t.Fatalf("the outcome over the quota: %+v (%s)", a2, a2.Error)
	}
	if b1 := leader.mustGet("e-b1"); b1.Status != store.StatusCompleted || len(b1.Data) != 1202 {
		t.Fatalf("bob's outcome within his quota: %+v", b1)
	}
}

// TestStoreBytesRefusal checks the cluster-wide bound on bytes: a
// reservation that does not fit is refused with a *store.CapacityError,
// on the leader and over the wire, and changes nothing; the bound is in
// the snapshot.
func TestStoreBytesRefusal(t *testing.T) {
	x := newProc(t)
	x.mustOK(fsm.SetLimits(100, 250))
	x.mustReserve("a1", "e-a1", "n1")
	x.mustReserve("a2", "e-a2", "n1")
	before := x.snapshot()
	r := x.apply(fsm.Reserve(key("a3"), fp, execution("e-a3", "n1")))
	for side, resp := range map[string]fsm.Response{"leader": r, "follower": overTheWire(t, r)} {
		err := resp.Err()
		var ce *store.CapacityError
		if !errors.As(err, &ce) || ce.Resource != store.ResourceBytes || ce.Limit != 250 || !errors.Is(err, store.ErrCapacity) {
			t.Fatalf("%s: %v, want a *store.CapacityError of 250 bytes", side, err)
		}
	}
	if string(before) != string(x.snapshot()) {
		t.Fatal("a refused reservation changed the state")
	}
	if p := mustRestore(t, before); p.State().MaxBytes() != 250 || p.State().Bytes() != x.p.State().Bytes() {
		t.Fatalf("restored MaxBytes %d, Bytes %d", p.State().MaxBytes(), p.State().Bytes())
	}
	// A capacity command with max_bytes 0 removes the bound on every
	// replica alike.
	x.mustOK(fsm.SetLimits(100, 0))
	x.mustReserve("a3", "e-a3", "n1")
	if got := x.p.State().MaxBytes(); got != 0 {
		t.Fatalf("MaxBytes after a capacity command without it: %d", got)
	}
	if r := x.apply(fsm.SetLimits(100, -1)); r.Code != store.CodeInvalidRequest {
		t.Fatalf("negative max bytes: %+v, want invalid", r)
	}
}
