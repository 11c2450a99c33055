package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
)

// processes opens n stores on one schema, each with a pool of its own, as
// n processes sharing the database would.
func processes(t *testing.T, n int, cfg postgres.Config) []*postgres.Store {
	t.Helper()
	return processesOn(t, n, cfg, needServer(t).DSN("postgres")+" pool_max_conns=6")
}

// processesOn opens n stores on dsn at once (their migrations race), in
// one new schema.
func processesOn(t *testing.T, n int, cfg postgres.Config, dsn string) []*postgres.Store {
	t.Helper()
	cfg.Schema, cfg.Logger = freshSchema(), quiet
	type opened struct {
		s   *postgres.Store
		err error
	}
	out := make([]*postgres.Store, n)
	for i, o := range race(n, func(int) opened {
		s, err := postgres.Open(context.Background(), dsn, cfg)
		return opened{s, err}
	}) {
		if o.err != nil {
			t.Fatalf("Open: %v", o.err)
		}
		t.Cleanup(o.s.Close)
		out[i] = o.s
	}
	return out
}

// race runs fn(g) on goroutines goroutines released together, and returns
// their results by goroutine.
func race[T any](goroutines int, fn func(g int) T) []T {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		out   = make([]T, goroutines)
	)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[g] = fn(g)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

type reserved struct {
	exec string
	res  store.Reservation
	err  error
}

// TestOneIdentityManyProcesses races reservers of one identity through
// several pools: exactly one reserves, every other is told uncertain and
// names the winner; once the winner completes, every retry is a replay.
func TestOneIdentityManyProcesses(t *testing.T) {
	t.Parallel()
	stores := processes(t, 6, postgres.Config{})
	ctx := context.Background()
	k := store.Key{Principal: "alice", Session: "s", RequestID: "the-one"}
	const goroutines = 240
	results := race(goroutines, func(g int) reserved {
		ex := newExecution(fmt.Sprintf("one-%d", g))
		res, err := stores[g%len(stores)].Reserve(ctx, k, "fp", ex)
		return reserved{ex.ID, res, err}
	})
	var winners []string
	for _, r := range results {
		switch {
		case r.err != nil:
			t.Fatalf("Reserve: %v", r.err)
		case r.res.Outcome == store.Reserved:
			winners = append(winners, r.exec)
		case r.res.Outcome != store.Uncertain:
			t.Fatalf("Reserve = %v, want reserved or uncertain", r.res.Outcome)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d executions reserved one identity: %v", len(winners), winners)
	}
	for _, r := range results {
		if r.res.Record.ExecutionID != winners[0] {
			t.Fatalf("an answer names %s, the winner is %s", r.res.Record.ExecutionID, winners[0])
		}
	}
	mustComplete(t, stores[0], k, "fp", completedResult(winners[0], `{"n":1}`))
	for _, r := range race(60, func(g int) reserved {
		res, err := stores[g%len(stores)].Reserve(ctx, k, "fp", newExecution(fmt.Sprintf("again-%d", g)))
		return reserved{"", res, err}
	}) {
		if r.err != nil || r.res.Outcome != store.Replay || string(r.res.Record.Data) != `{"n":1}` {
			t.Fatalf("Reserve after completion = %v %s, %v; want the replay", r.res.Outcome, r.res.Record.Data, r.err)
		}
	}
}

// TestCapacityExactUnderRace races reservers of distinct identities
// through several pools at a small capacity: exactly capacity reserve,
// every other is refused with ErrCapacity, and the counters match the
// records. Then releases race new reservations: the store never holds more
// than capacity.
func TestCapacityExactUnderRace(t *testing.T) {
	t.Parallel()
	const capacity = 40
	stores := processes(t, 5, postgres.Config{Capacity: capacity})
	ctx := context.Background()
	results := race(200, func(g int) reserved {
		ex := newExecution(fmt.Sprintf("cap-%d", g))
		k := store.Key{Principal: fmt.Sprintf("p%d", g%3), Session: "s", RequestID: fmt.Sprintf("cap-%d", g)}
		res, err := stores[g%len(stores)].Reserve(ctx, k, "fp", ex)
		return reserved{ex.ID, res, err}
	})
	var won []string
	for _, r := range results {
		switch {
		case r.err == nil && r.res.Outcome == store.Reserved:
			won = append(won, r.exec)
		case errors.Is(r.err, store.ErrCapacity):
			var qe *store.QuotaError
			if errors.As(r.err, &qe) {
				t.Fatalf("refused by a quota, none was set: %v", r.err)
			}
		default:
			t.Fatalf("Reserve = %v, %v; want reserved or ErrCapacity", r.res.Outcome, r.err)
		}
	}
	if len(won) != capacity {
		t.Fatalf("%d reservations at capacity %d", len(won), capacity)
	}
	admin := adminPool(t, needServer(t))
	c := readCounts(t, admin, stores[0])
	wantCountsExact(t, c)
	if c.records != capacity {
		t.Fatalf("%d records at capacity %d", c.records, capacity)
	}

	// Ten releases race fifty new reservations.
	for _, id := range won[:10] {
		if _, err := stores[0].Resolve(ctx, id, store.Resolution{Result: completedResult(id, `1`), AllowRunning: true}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := stores[0].MarkInterrupted(ctx, "node-a"); err != nil || n != capacity-10 {
		t.Fatalf("MarkInterrupted = %d, %v; want %d", n, err, capacity-10)
	}
	var (
		mu       sync.Mutex
		released int
	)
	results = race(60, func(g int) reserved {
		if g < 10 {
			_, err := stores[g%len(stores)].Release(ctx, won[10+g], false)
			if err == nil {
				mu.Lock()
				released++
				mu.Unlock()
			}
			return reserved{err: err}
		}
		ex := newExecution(fmt.Sprintf("cap2-%d", g))
		k := store.Key{Principal: "p9", Session: "s", RequestID: fmt.Sprintf("cap2-%d", g)}
		res, err := stores[g%len(stores)].Reserve(ctx, k, "fp", ex)
		return reserved{ex.ID, res, err}
	})
	newer := 0
	for g, r := range results {
		switch {
		case g < 10 && r.err != nil:
			t.Fatalf("Release: %v", r.err)
		case g < 10:
		case r.err == nil && r.res.Outcome == store.Reserved:
			newer++
		case !errors.Is(r.err, store.ErrCapacity):
			t.Fatalf("Reserve = %v, %v; want reserved or ErrCapacity", r.res.Outcome, r.err)
		}
	}
	c = readCounts(t, admin, stores[0])
	wantCountsExact(t, c)
	if released != 10 || newer > 10 || c.records != capacity-10+int64(newer) {
		t.Fatalf("released %d, reserved %d more: %d records at capacity %d", released, newer, c.records, capacity)
	}
	st, err := stores[1].Stats(ctx)
	if err != nil || int64(st.Entries) != c.records || st.Capacity != capacity {
		t.Fatalf("Stats = %+v, %v; want %d of %d", st, err, c.records, capacity)
	}
}

// TestQuotaExactUnderRace races reservers of three principals, each under
// a quota, through several pools: exactly the quota of each reserves, the
// others get a *QuotaError naming their principal.
func TestQuotaExactUnderRace(t *testing.T) {
	t.Parallel()
	const quota = 7
	stores := processes(t, 4, postgres.Config{})
	ctx := context.Background()
	principals := []string{"alice", "bob", "carol"}
	results := race(150, func(g int) reserved {
		ex := newExecution(fmt.Sprintf("quota-%d", g))
		ex.Quota = quota
		k := store.Key{Principal: principals[g%3], Session: fmt.Sprintf("s%d", g%5), RequestID: fmt.Sprintf("q-%d", g)}
		res, err := stores[g%len(stores)].Reserve(ctx, k, "fp", ex)
		return reserved{ex.ID, res, err}
	})
	won := map[string]int{}
	for g, r := range results {
		var qe *store.QuotaError
		switch {
		case r.err == nil && r.res.Outcome == store.Reserved:
			won[principals[g%3]]++
		case errors.As(r.err, &qe):
			if qe.Principal != principals[g%3] || qe.Quota != quota {
				t.Fatalf("QuotaError %+v for %s", qe, principals[g%3])
			}
		default:
			t.Fatalf("Reserve = %v, %v; want reserved or a QuotaError", r.res.Outcome, r.err)
		}
	}
	for _, p := range principals {
		if won[p] != quota {
			t.Fatalf("reservations by principal: %v, want %d each", won, quota)
		}
	}
	wantCountsExact(t, readCounts(t, adminPool(t, needServer(t)), stores[0]))
}

// TestSerializableDefault runs stores on sessions whose default isolation
// is SERIALIZABLE: the store's own transactions are READ COMMITTED
// whatever the default (its checks follow a lock and must see what
// committed while it was awaited), so concurrent Opens and reservations
// neither fail nor exceed the capacity.
func TestSerializableDefault(t *testing.T) {
	t.Parallel()
	const capacity = 25
	dsn := needServer(t).DSN("postgres") + " pool_max_conns=6 default_transaction_isolation=serializable"
	stores := processesOn(t, 4, postgres.Config{Capacity: capacity}, dsn)
	ctx := context.Background()
	won := 0
	for _, r := range race(120, func(g int) reserved {
		res, err := stores[g%len(stores)].Reserve(ctx, key(fmt.Sprintf("ser-%d", g)), "fp", newExecution("ser"))
		return reserved{res: res, err: err}
	}) {
		switch {
		case r.err == nil && r.res.Outcome == store.Reserved:
			won++
		case !errors.Is(r.err, store.ErrCapacity):
			t.Fatalf("Reserve = %v, %v; want reserved or ErrCapacity", r.res.Outcome, r.err)
		}
	}
	if won != capacity {
		t.Fatalf("%d reservations at capacity %d", won, capacity)
	}
	wantCountsExact(t, readCounts(t, adminPool(t, needServer(t)), stores[0]))
}

// TestBytesExactUnderRace races completions, through several pools, of
// records of three principals under a bound on the store's bytes that
// only some outcomes fit: the rounds settle them together (one statement
// for all while all fit, one each once they do not), and afterwards the
// store's bytes are exactly what the records hold, no more outcomes
// fitted than the bound had room for, and every outcome that did not fit
// is recorded as the failure store.OverflowResult makes of it.
func TestBytesExactUnderRace(t *testing.T) {
	t.Parallel()
	const n = 90
	ctx := context.Background()
	stores := processes(t, 3, postgres.Config{})
	keys := make([]store.Key, n)
	execs := make([]store.Execution, n)
	for g := range n {
		keys[g] = store.Key{Principal: fmt.Sprintf("p%d", g%3), Session: "s", RequestID: fmt.Sprintf("bytes-%d", g)}
		execs[g] = newExecution(fmt.Sprintf("bytes-%d", g))
		mustReserve(t, stores[g%len(stores)], keys[g], "fp", execs[g], store.Reserved)
	}
	st, err := stores[0].Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Room for about half of the outcomes.
	const outcome = 1000
	bound := st.Bytes + n/2*outcome
	for _, s := range stores {
		s.SetMaxBytes(bound)
	}
	data := `"` + strings.Repeat("x", outcome-2) + `"`
	results := race(n, func(g int) reserved {
		rec, err := stores[g%len(stores)].Complete(ctx, keys[g], "fp", completedResult(execs[g].ID, data))
		return reserved{exec: execs[g].ID, res: store.Reservation{Record: rec}, err: err}
	})
	fitted := 0
	for _, r := range results {
		switch {
		case r.err != nil:
			t.Fatalf("Complete: %v", r.err)
		case r.res.Record.Status == store.StatusCompleted && string(r.res.Record.Data) == data:
			fitted++
		case r.res.Record.Status == store.StatusFailed && strings.Contains(string(r.res.Record.Error), `"limit":`):
		default:
			t.Fatalf("Complete recorded %+v", r.res.Record)
		}
	}
	if fitted == 0 || fitted == n {
		t.Fatalf("%d of %d outcomes fitted a bound with room for about half", fitted, n)
	}
	admin := adminPool(t, needServer(t))
	var storeBytes, truth int64
	q := "SELECT (SELECT bytes FROM " + table(stores[0], "meta") + ") - (SELECT coalesce(sum(bytes), 0) FROM " + table(stores[0], "leases") +
		" WHERE kind = 0), (SELECT sum(64 + octet_length(principal) + octet_length(session_id) + octet_length(request_id)" +
		" + octet_length(execution_id) + octet_length(tool) + octet_length(fingerprint) + octet_length(node_id)" +
		" + coalesce(octet_length(data), 0) + coalesce(octet_length(error), 0)) FROM " + table(stores[0], "records") + ")"
	if err := admin.QueryRow(ctx, q).Scan(&storeBytes, &truth); err != nil {
		t.Fatal(err)
	}
	if storeBytes != truth {
		t.Fatalf("meta.bytes less the leases = %d, the records hold %d", storeBytes, truth)
	}
	// The failures recorded instead are counted too, whatever the bound
	// (store.OverflowResult: small and bounded), so at most the room's
	// worth of outcomes fitted.
	if fitted > n/2 {
		t.Fatalf("%d outcomes of %d bytes fitted in room for %d", fitted, outcome, n/2)
	}
	wantCountsExact(t, readCounts(t, admin, stores[0]))
	t.Logf("%d of %d outcomes fitted; %d bytes of %d", fitted, n, storeBytes, bound)
}
