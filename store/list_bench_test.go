package store_test

import (
	"testing"

	"github.com/carmyhq/carmy/store"
)

// BenchmarkStateList100k lists a page of a State of 100k records, as the
// replicated store does under its read lock: one session, every session
// of one principal, and every record (the admin's console, with and
// without a filter that keeps few records).
func BenchmarkStateList100k(b *testing.B) {
	st := listState(b, 100_000)
	for _, c := range []struct {
		name string
		q    store.ListQuery
	}{
		{"session", store.ListQuery{Principal: "p1", Session: "s1"}},
		{"principal", store.ListQuery{Principal: "p1", AllSessions: true}},
		{"everything", store.ListQuery{AllPrincipals: true, AllSessions: true}},
		{"attention", store.ListQuery{AllPrincipals: true, AllSessions: true, Attention: true, GoneNodes: []string{"gone"}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				st.List(c.q)
			}
		})
	}
}
