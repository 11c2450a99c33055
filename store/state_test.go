package store_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

func TestStateRestoreGivesEqualState(t *testing.T) {
	s := store.NewState(10)
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for i, id := range []string{"e1", "e2", "e3"} {
		k := store.Key{Principal: "p", Session: "s", RequestID: id}
		if _, err := s.Reserve(k, "fp", store.Execution{ID: id, Tool: "t", NodeID: "n", StartedAt: at}, uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	res := store.Result{ExecutionID: "e2", Status: store.StatusCompleted, Data: json.RawMessage(`{"x":1}`), FinishedAt: at}
	if _, err := s.Complete(store.Key{Principal: "p", Session: "s", RequestID: "e2"}, "fp", res); err != nil {
		t.Fatal(err)
	}
	s.MarkInterrupted("n")

	r := store.NewState(10)
	if err := r.Restore(s.Records(), s.LastSeq()); err != nil {
		t.Fatal(err)
	}
	if !r.Equal(s) || !s.Equal(r) {
		t.Fatal("restored state differs")
	}
	if _, err := r.Release("e1", false); err != nil {
		t.Fatal(err)
	}
	if r.Equal(s) {
		t.Fatal("Equal missed a released record")
	}
	dup := append(s.Records(), s.Records()[0])
	if err := r.Restore(dup, 3); err == nil {
		t.Fatal("Restore accepted a duplicate identity")
	}
}

func TestStateReserveNeedsGrowingSeq(t *testing.T) {
	s := store.NewState(10)
	k := store.Key{RequestID: "a"}
	if _, err := s.Reserve(k, "fp", store.Execution{ID: "e1"}, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(store.Key{RequestID: "b"}, "fp", store.Execution{ID: "e2"}, 5); err == nil {
		t.Fatal("Reserve accepted a seq that does not grow")
	}
}

// TestStateInterrupted: the count of interrupted records follows marking
// and settling (the carmy_executions_interrupted gauge).
func TestStateInterrupted(t *testing.T) {
	s := store.NewState(10)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range []string{"a", "b", "c"} {
		k := store.Key{Principal: "p", RequestID: id}
		if _, err := s.Reserve(k, "fp", store.Execution{ID: "e-" + id, Tool: "t", NodeID: "n1", StartedAt: t0}, uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Interrupted(); n != 0 {
		t.Fatalf("Interrupted() = %d before any, want 0", n)
	}
	if n := s.MarkInterrupted("n1"); n != 3 {
		t.Fatalf("MarkInterrupted = %d, want 3", n)
	}
	if n := s.Interrupted(); n != 3 {
		t.Fatalf("Interrupted() = %d, want 3", n)
	}
}

// TestListCopiesOnlyThePage lists every session of a State of many
// records: the records are visited by pointer, and only the page is
// copied, so the allocations do not grow with the State.
func TestListCopiesOnlyThePage(t *testing.T) {
	small, large := listState(t, 100), listState(t, 5000)
	q := store.ListQuery{AllPrincipals: true, AllSessions: true, Tool: "t", Limit: 10}
	a := testing.AllocsPerRun(5, func() { small.List(q) })
	b := testing.AllocsPerRun(5, func() { large.List(q) })
	if b > a+2 {
		t.Fatalf("listing a page of 5000 records allocates %v times, of 100 records %v: the listing copies the table", b, a)
	}
	if p := large.List(q); len(p.Records) != 10 || p.Next == 0 {
		t.Fatalf("List = %d records, next %d; want a full page and more", len(p.Records), p.Next)
	}
}

func listState(t testing.TB, n int) *store.State {
	t.Helper()
	st := store.NewState(n)
	for i := range n {
		k := store.Key{Principal: fmt.Sprintf("p%d", i%5), Session: fmt.Sprintf("s%d", i%50), RequestID: fmt.Sprintf("r%d", i)}
		ex := store.Execution{ID: fmt.Sprintf("e%d", i), Tool: "t", NodeID: "n", StartedAt: time.Unix(1, 0)}
		if _, err := st.Reserve(k, "fp", ex, uint64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}
