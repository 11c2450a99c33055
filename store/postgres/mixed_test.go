package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
)

// TestMixedRoundsExactUnderRace races, through several stores (the nodes
// of a fleet), retries of held identities, releases of some of them, and
// new identities of a principal with a small quota and of others at a
// small capacity, so that rounds mix held and vacant identities (answered
// and reserved by one statement) and identities released between a round's
// lock decision and its statement. Every answer is one the bounds allow, a
// retry is answered from the record it finds, and at the end the store
// holds no more than its capacity, the principal no more than its quota,
// and the counters match the records.
func TestMixedRoundsExactUnderRace(t *testing.T) {
	t.Parallel()
	const (
		capacity = 30
		quota    = 12
		held     = 10
	)
	stores := processes(t, 4, postgres.Config{Capacity: capacity})
	ctx := context.Background()
	quotaExec := func(name string) store.Execution {
		ex := newExecution(name)
		ex.Quota = quota
		return ex
	}
	heldKey := func(i int) store.Key {
		return store.Key{Principal: "q", Session: "s", RequestID: fmt.Sprint("held-", i)}
	}
	heldIDs := make([]string, held)
	for i := range held {
		heldIDs[i] = mustReserve(t, stores[i%len(stores)], heldKey(i), "fp", quotaExec("held"), store.Reserved).ExecutionID
		if i%2 == 0 {
			mustComplete(t, stores[0], heldKey(i), "fp", completedResult(heldIDs[i], `{"held":true}`))
		}
	}

	results := race(180, func(g int) reserved {
		s := stores[g%len(stores)]
		switch g % 4 {
		case 0: // a retry of a held identity
			i := (g / 4) % held
			ex := quotaExec(fmt.Sprint("retry-", g))
			res, err := s.Reserve(ctx, heldKey(i), "fp", ex)
			return reserved{ex.ID, res, err}
		case 1: // a release of a running held identity, once each
			if i := (g/4)*2 + 1; i < held {
				_, err := s.Release(ctx, heldIDs[i], true)
				return reserved{exec: "release", err: err}
			}
			return reserved{exec: "none"}
		case 2: // a new identity of the principal with the quota
			ex := quotaExec(fmt.Sprint("q-", g))
			res, err := s.Reserve(ctx, store.Key{Principal: "q", Session: "s", RequestID: fmt.Sprint("q-", g)}, "fp", ex)
			return reserved{ex.ID, res, err}
		default: // a new identity of another principal
			ex := newExecution(fmt.Sprint("o-", g))
			res, err := s.Reserve(ctx, store.Key{Principal: fmt.Sprint("o", g%5), Session: "s", RequestID: fmt.Sprint("o-", g)}, "fp", ex)
			return reserved{ex.ID, res, err}
		}
	})
	refused := 0
	for g, r := range results {
		switch {
		case r.exec == "none":
		case r.exec == "release":
			if r.err != nil {
				t.Fatalf("Release: %v", r.err)
			}
		case r.err == nil && r.res.Outcome == store.Reserved:
			if r.res.Record.ExecutionID != r.exec {
				t.Fatalf("reserved as %s, asked as %s", r.res.Record.ExecutionID, r.exec)
			}
		case r.err == nil && g%4 == 0 && (r.res.Outcome == store.Replay || r.res.Outcome == store.Uncertain):
			i := (g / 4) % held
			if r.res.Record.Key != heldKey(i) {
				t.Fatalf("retry of %s answered from %s", heldKey(i), r.res.Record.Key)
			}
			if i%2 == 0 && (r.res.Outcome != store.Replay || r.res.Record.ExecutionID != heldIDs[i] || string(r.res.Record.Data) != `{"held":true}`) {
				t.Fatalf("retry of completed %s = %v %s %s; want its replay", heldKey(i), r.res.Outcome, r.res.Record.ExecutionID, r.res.Record.Data)
			}
		case errors.Is(r.err, store.ErrCapacity):
			refused++
			var qe *store.QuotaError
			if errors.As(r.err, &qe) && qe.Principal != "q" {
				t.Fatalf("refused by the quota of %s, none was set: %v", qe.Principal, r.err)
			}
		default:
			t.Fatalf("call %d = %v, %v; want reserved, a replay or uncertain for a retry, or a refusal by a bound", g, r.res.Outcome, r.err)
		}
	}
	admin := adminPool(t, needServer(t))
	c := readCounts(t, admin, stores[0])
	wantCountsExact(t, c)
	if c.records > capacity || c.perPrincipal["q"] > quota {
		t.Fatalf("%d records (capacity %d), %d of principal q (quota %d)", c.records, capacity, c.perPrincipal["q"], quota)
	}
	if refused == 0 {
		t.Fatal("no call was refused (135 new identities, room for 30): the test did not reach a bound")
	}
}
