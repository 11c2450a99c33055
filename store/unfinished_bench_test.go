package store_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

// BenchmarkStateUnfinished100k times the questions asked of a State of
// 100k records of which 10 are not finished, as a node asks them all the
// time: the approval expiry's listing (every second, on the leader), the
// running records' nodes (the leader's stray check), the interrupted
// gauge, an attention listing. Each visits the unfinished records alone,
// so its time does not grow with the finished ones.
func BenchmarkStateUnfinished100k(b *testing.B) {
	st := store.NewState(100_000)
	at := time.Unix(1, 0).UTC()
	for i := range 100_000 {
		k := store.Key{Principal: fmt.Sprintf("p%d", i%5), Session: fmt.Sprintf("s%d", i%50), RequestID: fmt.Sprintf("r%d", i)}
		ex := store.Execution{ID: fmt.Sprintf("e%d", i), Tool: "t", NodeID: "n", StartedAt: at}
		if i%10_000 == 0 {
			ex.Approval = &store.ApprovalGate{ExpiresAt: at.Add(time.Hour)}
		}
		if _, err := st.Reserve(k, "fp", ex, uint64(i+1)); err != nil {
			b.Fatal(err)
		}
		if i%10_000 != 0 {
			res := store.Result{ExecutionID: ex.ID, Status: store.StatusCompleted, Data: json.RawMessage(`{}`), FinishedAt: at}
			if _, err := st.Complete(k, "fp", res); err != nil {
				b.Fatal(err)
			}
		}
	}
	all := store.ListQuery{AllPrincipals: true, AllSessions: true}
	for _, c := range []struct {
		name string
		ask  func()
	}{
		{"awaiting approval", func() {
			q := all
			q.Statuses, q.Limit = []store.Status{store.StatusAwaitingApproval}, store.MaxListLimit
			if n := len(st.List(q).Records); n != 10 {
				b.Fatalf("%d awaiting, want 10", n)
			}
		}},
		{"running nodes", func() { st.RunningNodes() }},
		{"interrupted", func() { st.Interrupted() }},
		{"attention", func() {
			q := all
			q.Attention, q.GoneNodes = true, []string{"gone"}
			st.List(q)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.ask()
			}
		})
	}
}
