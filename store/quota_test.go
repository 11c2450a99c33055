package store_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

var quotaT0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// quotaState is a State fed with growing seqs, as a log would.
type quotaState struct {
	t   *testing.T
	st  *store.State
	seq uint64
}

func newQuotaState(t *testing.T, capacity int) *quotaState {
	return &quotaState{t: t, st: store.NewState(capacity)}
}

func pkey(principal, req string) store.Key {
	return store.Key{Principal: principal, Session: "s", RequestID: req}
}

// reserve reserves k for execution id under quota.
func (q *quotaState) reserve(k store.Key, fp, id string, quota int) (store.Reservation, error) {
	q.seq++
	return q.st.Reserve(k, fp, store.Execution{ID: id, Tool: "t", NodeID: "n", StartedAt: quotaT0, Quota: quota}, q.seq)
}

func (q *quotaState) mustReserve(k store.Key, id string, quota int, want store.Outcome) {
	q.t.Helper()
	res, err := q.reserve(k, "fp", id, quota)
	if err != nil || res.Outcome != want {
		q.t.Fatalf("Reserve(%s, quota %d) = %v, %v; want %v", k, quota, res.Outcome, err, want)
	}
}

func (q *quotaState) mustComplete(k store.Key, id string, at time.Time) {
	q.t.Helper()
	res := store.Result{ExecutionID: id, Status: store.StatusCompleted, Data: json.RawMessage(`1`), FinishedAt: at}
	if _, err := q.st.Complete(k, "fp", res); err != nil {
		q.t.Fatalf("Complete(%s): %v", k, err)
	}
}

func (q *quotaState) wantEntries(want map[string]int) {
	q.t.Helper()
	for p, n := range want {
		if got := q.st.PrincipalEntries(p); got != n {
			q.t.Fatalf("PrincipalEntries(%q) = %d, want %d", p, got, n)
		}
	}
}

// wantQuotaError checks that err is the refusal of principal's new
// identity at quota.
func wantQuotaError(t *testing.T, err error, principal string, quota int) {
	t.Helper()
	var qe *store.QuotaError
	if !errors.As(err, &qe) || qe.Principal != principal || qe.Quota != quota {
		t.Fatalf("err = %v, want a *store.QuotaError of %q at %d", err, principal, quota)
	}
	if !errors.Is(err, store.ErrCapacity) || store.CodeOf(err) != "IDEMPOTENCY_CAPACITY" {
		t.Fatalf("err = %v (code %q), want it to match ErrCapacity with IDEMPOTENCY_CAPACITY", err, store.CodeOf(err))
	}
}

func TestStateQuotaRefusesNewIdentitiesAtQuota(t *testing.T) {
	q := newQuotaState(t, 100)
	q.mustReserve(pkey("alice", "a1"), "e-a1", 2, store.Reserved)
	q.mustReserve(pkey("alice", "a2"), "e-a2", 2, store.Reserved)
	q.mustComplete(pkey("alice", "a1"), "e-a1", quotaT0)

	lastSeq, records := q.st.LastSeq(), q.st.Records()
	_, err := q.reserve(pkey("alice", "a3"), "fp", "e-a3", 2)
	wantQuotaError(t, err, "alice", 2)
	if _, err := q.st.Lookup(pkey("alice", "a3")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused reservation left a record: %v", err)
	}
	restored := store.NewState(100)
	if err := restored.Restore(records, lastSeq); err != nil {
		t.Fatal(err)
	}
	if !restored.Equal(q.st) {
		t.Fatal("a refused reservation changed the state")
	}
	// A lower quota refuses too: the bound is "at least", not "exactly".
	_, err = q.reserve(pkey("alice", "a3"), "fp", "e-a3", 1)
	wantQuotaError(t, err, "alice", 1)

	// The identities alice holds are answered as ever.
	q.mustReserve(pkey("alice", "a1"), "e-x1", 2, store.Replay)
	q.mustReserve(pkey("alice", "a2"), "e-x2", 2, store.Uncertain)
	if res, err := q.reserve(pkey("alice", "a1"), "fp-other", "e-x3", 2); err != nil || res.Outcome != store.Conflict {
		t.Fatalf("other fingerprint at quota: %v, %v; want conflict", res.Outcome, err)
	}

	// Other principals are not affected, and neither is alice without a
	// quota or under a higher one.
	q.mustReserve(pkey("bob", "b1"), "e-b1", 2, store.Reserved)
	q.mustReserve(pkey("bob", "b2"), "e-b2", 2, store.Reserved)
	q.mustReserve(pkey("alice", "a3"), "e-a3", 3, store.Reserved)
	q.mustReserve(pkey("alice", "a4"), "e-a4", 0, store.Reserved)
	q.wantEntries(map[string]int{"alice": 4, "bob": 2, "carol": 0})
	_, err = q.reserve(pkey("bob", "b3"), "fp", "e-b3", 2)
	wantQuotaError(t, err, "bob", 2)

	// The principal is the whole key part: sessions share one quota.
	_, err = q.reserve(store.Key{Principal: "bob", Session: "other", RequestID: "b3"}, "fp", "e-b3", 2)
	wantQuotaError(t, err, "bob", 2)
}

func TestStateQuotaAfterTheStoreIsFull(t *testing.T) {
	// Both bounds reached: the store-wide one answers (the store is full
	// for everyone), and both are capacity.
	q := newQuotaState(t, 1)
	q.mustReserve(pkey("alice", "a1"), "e-a1", 1, store.Reserved)
	_, err := q.reserve(pkey("alice", "a2"), "fp", "e-a2", 1)
	var qe *store.QuotaError
	if err != store.ErrCapacity || errors.As(err, &qe) {
		t.Fatalf("err = %v, want ErrCapacity itself", err)
	}
}

func TestStateQuotaRoomComesBackWhenRecordsGo(t *testing.T) {
	q := newQuotaState(t, 100)
	q.mustReserve(pkey("alice", "a1"), "e-a1", 2, store.Reserved)
	q.mustReserve(pkey("alice", "a2"), "e-a2", 2, store.Reserved)
	_, err := q.reserve(pkey("alice", "a3"), "fp", "e-a3", 2)
	wantQuotaError(t, err, "alice", 2)

	// A release frees one place.
	if _, err := q.st.Release("e-a2", true); err != nil {
		t.Fatal(err)
	}
	q.wantEntries(map[string]int{"alice": 1})
	q.mustReserve(pkey("alice", "a3"), "e-a3", 2, store.Reserved)
	_, err = q.reserve(pkey("alice", "a4"), "fp", "e-a4", 2)
	wantQuotaError(t, err, "alice", 2)

	// Expiring a finished record frees one more.
	q.mustComplete(pkey("alice", "a1"), "e-a1", quotaT0)
	if n := q.st.Expire(quotaT0.Add(time.Second)); n != 1 {
		t.Fatalf("Expire = %d, want 1", n)
	}
	q.wantEntries(map[string]int{"alice": 1})
	q.mustReserve(pkey("alice", "a4"), "e-a4", 2, store.Reserved)
}

func TestStatePrincipalEntriesFollowEveryChange(t *testing.T) {
	q := newQuotaState(t, 100)
	for _, r := range []struct{ principal, req string }{
		{"alice", "a1"}, {"alice", "a2"}, {"alice", "a3"}, {"bob", "b1"}, {"bob", "b2"}, {"carol", "c1"},
	} {
		q.mustReserve(pkey(r.principal, r.req), "e-"+r.req, 0, store.Reserved)
	}
	q.wantEntries(map[string]int{"alice": 3, "bob": 2, "carol": 1, "dave": 0})

	// Restore rebuilds the counts from the records alone.
	restored := store.NewState(100)
	if err := restored.Restore(q.st.Records(), q.st.LastSeq()); err != nil {
		t.Fatal(err)
	}
	for p, n := range map[string]int{"alice": 3, "bob": 2, "carol": 1, "dave": 0} {
		if got := restored.PrincipalEntries(p); got != n {
			t.Fatalf("after Restore, PrincipalEntries(%q) = %d, want %d", p, got, n)
		}
	}
	// A restore replaces the counts, it does not add to them.
	if err := restored.Restore(q.st.Records()[:1], q.st.LastSeq()); err != nil {
		t.Fatal(err)
	}
	if a, b := restored.PrincipalEntries("alice"), restored.PrincipalEntries("bob"); a != 1 || b != 0 {
		t.Fatalf("after a second Restore: alice %d, bob %d; want 1 and 0", a, b)
	}
	// A refused Restore keeps them.
	dup := append(q.st.Records(), q.st.Records()[0])
	if err := restored.Restore(dup, q.st.LastSeq()); err == nil {
		t.Fatal("Restore accepted a duplicate")
	}
	if a := restored.PrincipalEntries("alice"); a != 1 {
		t.Fatalf("a refused Restore changed alice's count to %d", a)
	}

	// Complete, interrupt and cancel change no count; release and expire
	// lower it; a refused release does not.
	q.mustComplete(pkey("alice", "a1"), "e-a1", quotaT0)
	q.st.MarkInterrupted("n")
	q.wantEntries(map[string]int{"alice": 3, "bob": 2, "carol": 1})
	if _, err := q.st.Release("e-a1", true); err == nil {
		t.Fatal("released a finished record")
	}
	if _, err := q.st.Release("e-b1", false); err != nil {
		t.Fatal(err)
	}
	if _, err := q.st.Resolve("e-c1", store.Resolution{Result: store.Result{
		ExecutionID: "e-c1", Status: store.StatusCompleted, Data: json.RawMessage(`1`), FinishedAt: quotaT0.Add(time.Hour),
	}}); err != nil {
		t.Fatal(err)
	}
	q.wantEntries(map[string]int{"alice": 3, "bob": 1, "carol": 1})
	if n := q.st.Expire(quotaT0.Add(time.Minute)); n != 1 { // a1; c1 finished later
		t.Fatalf("Expire = %d, want 1", n)
	}
	q.wantEntries(map[string]int{"alice": 2, "bob": 1, "carol": 1})
	if n := q.st.Expire(quotaT0.Add(2 * time.Hour)); n != 1 { // c1
		t.Fatalf("Expire = %d, want 1", n)
	}
	q.wantEntries(map[string]int{"alice": 2, "bob": 1, "carol": 0})
	// A released identity reserved again counts once.
	q.mustReserve(pkey("bob", "b1"), "e-b1-again", 0, store.Reserved)
	q.wantEntries(map[string]int{"alice": 2, "bob": 2})
	sum := 0
	for _, p := range []string{"alice", "bob", "carol"} {
		sum += q.st.PrincipalEntries(p)
	}
	if sum != q.st.Len() {
		t.Fatalf("counts sum to %d, Len is %d", sum, q.st.Len())
	}
}

func TestStateReserveRefusesNegativeQuota(t *testing.T) {
	q := newQuotaState(t, 10)
	_, err := q.reserve(pkey("alice", "a1"), "fp", "e-a1", -1)
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("negative quota: err = %v, want ErrInvalid", err)
	}
	if q.st.Len() != 0 {
		t.Fatal("a refused reservation left a record")
	}
}

func TestQuotaError(t *testing.T) {
	err := error(&store.QuotaError{Principal: "alice", Quota: 3})
	if got, want := err.Error(), `principal "alice" holds its quota of 3 records`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, store.ErrCapacity) || errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("errors.Is matches the wrong sentinels")
	}
	if store.CodeOf(err) != store.CodeOf(store.ErrCapacity) {
		t.Errorf("code %q, want %q", store.CodeOf(err), store.CodeOf(store.ErrCapacity))
	}
	f, ok := err.(interface{ Fields() map[string]any })
	if !ok || f.Fields()["principal"] != "alice" || f.Fields()["resource"] != "entries" || f.Fields()["limit"] != int64(3) || len(f.Fields()) != 3 {
		t.Errorf("fields = %v, want the principal, the resource and the limit", f)
	}
}
