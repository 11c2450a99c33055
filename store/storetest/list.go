package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/carmyhq/carmy/store"
)

// listing is a store seeded with nine records of three principals, three
// sessions (and ""), two tools and every status, and the execution id of
// each by name (r1 oldest, r9 newest):
//
//	r1 alice s1 a completed     r6 bob   s3 b running on node-gone
//	r2 alice s1 b failed        r7 alice "" a cancelled
//	r3 alice s2 a running       r8 alice s1 a timed_out
//	r4 bob   s1 a completed     r9 bob   s1 b interrupted
//	r5 alice s2 a interrupted
type listing struct {
	s   store.Store
	ids map[string]string
}

func seedListing(t *testing.T, newStore Factory) listing {
	t.Helper()
	s := newStore(t, 50)
	ctx := context.Background()
	l := listing{s: s, ids: make(map[string]string)}
	type seed struct {
		principal, session, tool string
		status                   store.Status
		node                     string
	}
	seeds := []seed{
		{"alice", "s1", "a", store.StatusCompleted, "node-a"},
		{"alice", "s1", "b", store.StatusFailed, "node-a"},
		{"alice", "s2", "a", store.StatusRunning, "node-a"},
		{"bob", "s1", "a", store.StatusCompleted, "node-a"},
		{"alice", "s2", "a", store.StatusInterrupted, "node-x"},
		{"bob", "s3", "b", store.StatusRunning, "node-gone"},
		{"alice", "", "a", store.StatusCancelled, "node-a"},
		{"alice", "s1", "a", store.StatusTimedOut, "node-a"},
		{"bob", "s1", "b", store.StatusInterrupted, "node-x"},
	}
	for i, sd := range seeds {
		name := fmt.Sprintf("r%d", i+1)
		k := store.Key{Principal: sd.principal, Session: sd.session, RequestID: name}
		ex := newExec(sd.tool)
		ex.NodeID = sd.node
		mustReserve(t, s, k, "fp", ex, store.Reserved)
		l.ids[name] = ex.ID
		switch sd.status {
		case store.StatusCompleted:
			mustComplete(t, s, k, "fp", completed(ex.ID, `{"ok":true}`))
		case store.StatusFailed, store.StatusTimedOut:
			mustComplete(t, s, k, "fp", failedWith(ex.ID, sd.status, "E"))
		case store.StatusCancelled:
			if _, err := s.Cancel(ctx, ex.ID, failedWith(ex.ID, store.StatusCancelled, "CANCELLED")); err != nil {
				t.Fatalf("Cancel(%s): %v", name, err)
			}
		}
	}
	if n, err := s.MarkInterrupted(ctx, "node-x"); err != nil || n != 2 {
		t.Fatalf("MarkInterrupted(node-x) = %d, %v; want 2", n, err)
	}
	return l
}

// names names recs, in their order.
func (l listing) names(t *testing.T, recs []store.Record) []string {
	t.Helper()
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		found := ""
		for name, id := range l.ids {
			if id == r.ExecutionID {
				found = name
			}
		}
		if found == "" {
			t.Fatalf("listed an execution that was not seeded: %+v", r)
		}
		out = append(out, found)
	}
	return out
}

// all pages through q, checking that every page but the last is full,
// and returns the records listed by name.
func (l listing) all(t *testing.T, q store.ListQuery) []string {
	t.Helper()
	var got []string
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatalf("List(%+v) does not end", q)
		}
		p, err := l.s.List(context.Background(), q)
		if err != nil {
			t.Fatalf("List(%+v): %v", q, err)
		}
		if p.Next != 0 && len(p.Records) != q.Limit {
			t.Fatalf("List(%+v): a page of %d records before the last, want %d", q, len(p.Records), q.Limit)
		}
		got = append(got, l.names(t, p.Records)...)
		if p.Next == 0 {
			return got
		}
		q.Before = p.Next
	}
}

// testListFilters holds every store to the same selection: principal,
// session or every session, statuses, tool and attention, combined by AND.
func testListFilters(t *testing.T, newStore Factory) {
	l := seedListing(t, newStore)
	st := func(ss ...store.Status) []store.Status { return ss }
	gone := []string{"node-gone"}
	cases := []struct {
		name string
		q    store.ListQuery
		want []string
	}{
		{"one session", store.ListQuery{Principal: "alice", Session: "s1"}, []string{"r8", "r2", "r1"}},
		{"the empty session", store.ListQuery{Principal: "alice", Session: ""}, []string{"r7"}},
		{"every session of a principal", store.ListQuery{Principal: "alice", AllSessions: true}, []string{"r8", "r7", "r5", "r3", "r2", "r1"}},
		{"another principal", store.ListQuery{Principal: "bob", AllSessions: true}, []string{"r9", "r6", "r4"}},
		{"an unknown principal", store.ListQuery{Principal: "carol", AllSessions: true}, nil},
		{"one session of every principal", store.ListQuery{AllPrincipals: true, Session: "s1"}, []string{"r9", "r8", "r4", "r2", "r1"}},
		{"everything", store.ListQuery{AllPrincipals: true, AllSessions: true}, []string{"r9", "r8", "r7", "r6", "r5", "r4", "r3", "r2", "r1"}},
		{"completed", store.ListQuery{AllPrincipals: true, AllSessions: true, Statuses: st(store.StatusCompleted)}, []string{"r4", "r1"}},
		{"timed_out", store.ListQuery{AllPrincipals: true, AllSessions: true, Statuses: st(store.StatusTimedOut)}, []string{"r8"}},
		{"cancelled", store.ListQuery{AllPrincipals: true, AllSessions: true, Statuses: st(store.StatusCancelled)}, []string{"r7"}},
		{"open", store.ListQuery{AllPrincipals: true, AllSessions: true, Statuses: st(store.StatusRunning, store.StatusInterrupted)}, []string{"r9", "r6", "r5", "r3"}},
		{"a status that does not exist", store.ListQuery{AllPrincipals: true, AllSessions: true, Statuses: st("bogus")}, nil},
		{"completed or failed of a session", store.ListQuery{Principal: "alice", Session: "s1", Statuses: st(store.StatusCompleted, store.StatusFailed)}, []string{"r2", "r1"}},
		{"a tool", store.ListQuery{AllPrincipals: true, AllSessions: true, Tool: "b"}, []string{"r9", "r6", "r2"}},
		{"a tool nobody called", store.ListQuery{AllPrincipals: true, AllSessions: true, Tool: "c"}, nil},
		{"a tool and a status", store.ListQuery{AllPrincipals: true, AllSessions: true, Tool: "a", Statuses: st(store.StatusRunning)}, []string{"r3"}},
		{"a tool, a status and a principal", store.ListQuery{Principal: "bob", AllSessions: true, Tool: "b", Statuses: st(store.StatusInterrupted)}, []string{"r9"}},
		{"attention", store.ListQuery{AllPrincipals: true, AllSessions: true, Attention: true, GoneNodes: gone}, []string{"r9", "r6", "r5"}},
		{"attention without gone nodes", store.ListQuery{AllPrincipals: true, AllSessions: true, Attention: true}, []string{"r9", "r5"}},
		{"attention, a node that holds nothing", store.ListQuery{AllPrincipals: true, AllSessions: true, Attention: true, GoneNodes: []string{"node-z"}}, []string{"r9", "r5"}},
		{"attention of a principal", store.ListQuery{Principal: "alice", AllSessions: true, Attention: true, GoneNodes: gone}, []string{"r5"}},
		{"attention and running", store.ListQuery{AllPrincipals: true, AllSessions: true, Attention: true, GoneNodes: gone, Statuses: st(store.StatusRunning)}, []string{"r6"}},
		{"attention of a session", store.ListQuery{AllPrincipals: true, Session: "s1", Attention: true, GoneNodes: gone}, []string{"r9"}},
	}
	for _, c := range cases {
		for _, limit := range []int{0, 1, 2} {
			q := c.q
			q.Limit = limit
			if limit == 0 {
				p, err := l.s.List(context.Background(), q)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				if got := l.names(t, p.Records); !slices.Equal(got, c.want) || p.Next != 0 {
					t.Errorf("%s: List(%+v) = %v (next %d), want %v", c.name, q, got, p.Next, c.want)
				}
				continue
			}
			if got := l.all(t, q); !slices.Equal(got, c.want) {
				t.Errorf("%s, pages of %d: listed %v, want %v", c.name, limit, got, c.want)
			}
		}
	}
}

// testListFilteredPages checks that the filters are applied before the
// limit: the pages of a filtered listing are full while matching records
// remain, however many records that do not match lie between them.
func testListFilteredPages(t *testing.T, newStore Factory) {
	s := newStore(t, 100)
	ctx := context.Background()
	var want []string
	for i := range 40 {
		tool := "noise"
		if i%7 == 3 {
			tool = "rare"
		}
		ex := newExec(tool)
		k := store.Key{Principal: fmt.Sprintf("p%d", i%3), Session: fmt.Sprintf("s%d", i%4), RequestID: fmt.Sprintf("f%d", i)}
		mustReserve(t, s, k, "fp", ex, store.Reserved)
		if tool == "rare" {
			want = append([]string{ex.ID}, want...)
		}
	}
	q := store.ListQuery{AllPrincipals: true, AllSessions: true, Tool: "rare", Limit: 2}
	var got []string
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("filtered listing does not end")
		}
		p, err := s.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if p.Next != 0 && len(p.Records) != 2 {
			t.Fatalf("page %d holds %d records before the last, want 2", pages, len(p.Records))
		}
		for _, r := range p.Records {
			got = append(got, r.ExecutionID)
		}
		if p.Next == 0 {
			break
		}
		q.Before = p.Next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged through %v, want %v", got, want)
	}
}

// testRunningNodes checks RunningNodeLister, for stores that implement
// it: the nodes that hold running records, and none other.
func testRunningNodes(t *testing.T, newStore Factory) {
	l := seedListing(t, newStore)
	rn, ok := l.s.(store.RunningNodeLister)
	if !ok {
		t.Skip("the store does not implement store.RunningNodeLister")
	}
	got, err := rn.RunningNodes(context.Background())
	if err != nil || !slices.Equal(got, []string{"node-a", "node-gone"}) {
		t.Fatalf("RunningNodes = %v, %v; want [node-a node-gone]", got, err)
	}
}
