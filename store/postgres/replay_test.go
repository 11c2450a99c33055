package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
)

// TestReplaysTakeNoLock checks that Reserve answers held identities
// (replay, conflict, uncertain) without the lock of the counts (the meta
// row and every lease row), many at once and in one round, while another
// transaction holds them; and that a vacant identity, which needs them,
// waits for them and then reserves.
func TestReplaysTakeNoLock(t *testing.T) {
	s := newStore(t, postgres.Config{Capacity: 100})
	pool := adminPool(t, needServer(t))
	ctx := context.Background()

	const n = 12
	held := make([]store.Execution, n)
	for i := range held {
		held[i] = newExecution("held")
		mustReserve(t, s, key(fmt.Sprint("r", i)), "fp", held[i], store.Reserved)
		if i%3 != 2 { // every third one stays running
			mustComplete(t, s, key(fmt.Sprint("r", i)), "fp", completedResult(held[i].ID, `{"i":1}`))
		}
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT entries FROM "+table(s, "meta")+" FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	// And every lease, as a fold holds them (leases.go): a vacant
	// identity's round needs its Store's.
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+table(s, "leases")+" FOR UPDATE"); err != nil {
		t.Fatal(err)
	}

	// Held identities, asked together (so that rounds gather several):
	// answered while the lock is held.
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		for _, fp := range []string{"fp", "other"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				res, err := s.Reserve(rctx, key(fmt.Sprint("r", i)), fp, newExecution("again"))
				want := store.Replay
				switch {
				case fp != "fp":
					want = store.Conflict
				case i%3 == 2:
					want = store.Uncertain
				}
				if err != nil || res.Outcome != want || res.Record.ExecutionID != held[i].ID {
					errs <- fmt.Errorf("Reserve(r%d, %s) while the lock is held = %v %s, %v; want %v %s",
						i, fp, res.Outcome, res.Record.ExecutionID, err, want, held[i].ID)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// A vacant identity waits for the lock: its deadline passes first.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = s.Reserve(short, key("vacant"), "fp", newExecution("vacant"))
	cancel()
	if !errors.Is(err, store.ErrCommitUnknown) && !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Reserve of a vacant identity while the lock is held: %v; want it to wait past its deadline", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Once the lock is free, a vacant identity is reserved (the one above
	// is either reserved by its round or vacant: a fresh one is asked).
	mustReserve(t, s, key("vacant2"), "fp", newExecution("vacant2"), store.Reserved)
	wantCountsExact(t, readCounts(t, pool, s))
}
