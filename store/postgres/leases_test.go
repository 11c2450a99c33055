package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
)

// TestLeasesExactAtBounds runs three stores (three nodes) on one database
// far enough from the bounds that each holds leases, then races them to
// the bounds, where the leases run out together: a principal's quota
// admits exactly its quota, the capacity exactly its capacity, every
// other call is refused as docs/errors.md says (a QuotaError naming the principal,
// ErrCapacity), and the counts less the leases are the records'. With
// one round in flight per store, and with three (each with leases of its
// own).
func TestLeasesExactAtBounds(t *testing.T) {
	t.Parallel()
	for _, rounds := range []int{1, 3} {
		t.Run(fmt.Sprint("rounds=", rounds), func(t *testing.T) {
			t.Parallel()
			leasesExactAtBounds(t, rounds)
		})
	}
}

func leasesExactAtBounds(t *testing.T, rounds int) {
	const (
		capacity = 1000
		quota    = 200
	)
	stores := processes(t, 3, postgres.Config{Capacity: capacity, Rounds: rounds})
	ctx := context.Background()
	admin := adminPool(t, needServer(t))
	call := func(s *postgres.Store, principal, id string, quota int) reserved {
		ex := newExecution(id)
		ex.Quota = quota
		res, err := s.Reserve(ctx, store.Key{Principal: principal, Session: "s", RequestID: id}, "fp", ex)
		return reserved{ex.ID, res, err}
	}

	// Far from the bounds: every store is granted leases of its own.
	for i, s := range stores {
		for j := range 30 {
			if r := call(s, "free", fmt.Sprintf("warm-%d-%d", i, j), 0); r.err != nil || r.res.Outcome != store.Reserved {
				t.Fatalf("warm-up: %v, %v", r.res.Outcome, r.err)
			}
		}
	}
	var slots int
	if err := admin.QueryRow(ctx, "SELECT count(DISTINCT slot) FROM "+table(stores[0], "leases")+" WHERE kind = 0 AND entries > 0").Scan(&slots); err != nil {
		t.Fatal(err)
	}
	if slots < len(stores) {
		t.Fatalf("%d slots hold leases of entries, want one of each of %d stores at least", slots, len(stores))
	}
	wantCountsExact(t, readCounts(t, admin, stores[0]))

	// The quota: 600 calls of q (quota 200) race 300 of free.
	results := race(900, func(g int) reserved {
		if g%3 == 2 {
			return call(stores[g%len(stores)], "free", fmt.Sprintf("f-%d", g), 0)
		}
		return call(stores[g%len(stores)], "q", fmt.Sprintf("q-%d", g), quota)
	})
	won := map[string]int{}
	for g, r := range results {
		principal := "q"
		if g%3 == 2 {
			principal = "free"
		}
		var qe *store.QuotaError
		switch {
		case r.err == nil && r.res.Outcome == store.Reserved:
			won[principal]++
		case principal == "q" && errors.As(r.err, &qe) && qe.Principal == "q" && qe.Quota == quota:
		default:
			t.Fatalf("Reserve(%s) = %v, %v; want reserved or q's QuotaError", principal, r.res.Outcome, r.err)
		}
	}
	if won["q"] != quota || won["free"] != 300 {
		t.Fatalf("reserved %v, want q %d and free 300", won, quota)
	}
	wantCountsExact(t, readCounts(t, admin, stores[0]))

	// The capacity: 90 + 200 + 300 held, 800 race for the 410 left.
	results = race(800, func(g int) reserved {
		return call(stores[g%len(stores)], "free", fmt.Sprintf("c-%d", g), 0)
	})
	more := 0
	for _, r := range results {
		var qe *store.QuotaError
		switch {
		case r.err == nil && r.res.Outcome == store.Reserved:
			more++
		case errors.Is(r.err, store.ErrCapacity) && !errors.As(r.err, &qe):
		default:
			t.Fatalf("Reserve = %v, %v; want reserved or ErrCapacity", r.res.Outcome, r.err)
		}
	}
	c := readCounts(t, admin, stores[0])
	wantCountsExact(t, c)
	if more != capacity-590 || c.records != capacity {
		t.Fatalf("%d more reserved, %d records; want %d and %d", more, c.records, capacity-590, capacity)
	}
	for _, s := range stores {
		if st, err := s.Stats(ctx); err != nil || st.Entries != capacity {
			t.Fatalf("Stats = %+v, %v; want %d entries", st, err, capacity)
		}
	}
}

// TestLeasesBoundChanged gives a principal leases under no quota, then
// races calls under a quota through three stores: the leases granted
// under the old bound are folded back, and the quota admits exactly the
// room it leaves.
func TestLeasesBoundChanged(t *testing.T) {
	t.Parallel()
	stores := processes(t, 3, postgres.Config{})
	ctx := context.Background()
	for i := range 3 {
		ex := newExecution("m")
		mustReserve(t, stores[i], store.Key{Principal: "m", Session: "s", RequestID: fmt.Sprint("before-", i)}, "fp", ex, store.Reserved)
	}
	const quota = 5
	results := race(30, func(g int) reserved {
		ex := newExecution("m")
		ex.Quota = quota
		res, err := stores[g%3].Reserve(ctx, store.Key{Principal: "m", Session: "s", RequestID: fmt.Sprint("after-", g)}, "fp", ex)
		return reserved{ex.ID, res, err}
	})
	n := 0
	for _, r := range results {
		var qe *store.QuotaError
		switch {
		case r.err == nil && r.res.Outcome == store.Reserved:
			n++
		case errors.As(r.err, &qe) && qe.Principal == "m" && qe.Quota == quota:
		default:
			t.Fatalf("Reserve = %v, %v; want reserved or m's QuotaError", r.res.Outcome, r.err)
		}
	}
	if n != quota-3 {
		t.Fatalf("%d reserved under a quota of %d with 3 held, want %d", n, quota, quota-3)
	}
	wantCountsExact(t, readCounts(t, adminPool(t, needServer(t)), stores[0]))
}
