package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
)

// TestReserveContextEnds holds the meta row from another connection, so
// that rounds of reservations wait on the server:
//   - X's round fails when X's context ends (it was the round's only
//     member): nothing reserved.
//   - A and C form the next round; A's context ends while it is in flight,
//     so A is ErrCommitUnknown; the round goes on (C's context lives), and
//     when the lock is gone it commits both: A's unknown was right.
//   - D's context ends while it waits for a round: ErrUnavailable, never
//     sent, nothing reserved.
func TestReserveContextEnds(t *testing.T) {
	t.Parallel()
	srv := needServer(t)
	s := newStore(t, postgres.Config{})
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+table(s, "meta")+" FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	reserve := func(req string, timeout time.Duration) <-chan error {
		done := make(chan error, 1)
		go func() {
			c, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			_, err := s.Reserve(c, key(req), "fp", newExecution(req))
			done <- err
		}()
		return done
	}

	x := reserve("x", time.Second)
	first := waitingRound(t, s, x)
	a, c := reserve("a", 6*time.Second), reserve("c", time.Minute)
	if err := <-x; !storeDown(err) {
		t.Fatalf("X: %v; want ErrUnavailable or ErrCommitUnknown", err)
	}
	waitingRound(t, s, a, first)
	if err := <-reserve("d", 200*time.Millisecond); !errors.Is(err, store.ErrUnavailable) ||
		errors.Is(err, store.ErrCommitUnknown) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("D, which timed out waiting for its round: %v; want ErrUnavailable (deadline exceeded)", err)
	}
	if err := <-a; !errors.Is(err, store.ErrCommitUnknown) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("A, which timed out in its round: %v; want ErrCommitUnknown (deadline exceeded)", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-c; err != nil {
		t.Fatalf("C: %v", err)
	}
	if rec, err := s.Lookup(ctx, key("a")); err != nil || rec.Status != store.StatusRunning {
		t.Fatalf("Lookup(a) = %+v, %v; want A's round to have reserved it", rec, err)
	}
	for _, req := range []string{"x", "d"} {
		if _, err := s.Lookup(ctx, key(req)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Lookup(%s): %v; want nothing reserved", req, err)
		}
		mustReserve(t, s, key(req), "fp", newExecution(req), store.Reserved)
	}
}

// waitingRound waits until a statement of s's schema waits for a lock on
// the server, in a backend other than those in not, and returns its pid.
// (A round whose context ended leaves its backend waiting for the lock.)
func waitingRound(t *testing.T, s *postgres.Store, done <-chan error, not ...int32) int32 {
	t.Helper()
	admin := adminPool(t, needServer(t))
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pid int32
		err := admin.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND position($1 IN query) > 0 AND pid <> ALL($2) LIMIT 1`, table(s, "meta"), append([]int32{}, not...)).Scan(&pid)
		switch {
		case err == nil:
			return pid
		case !errors.Is(err, pgx.ErrNoRows):
			t.Fatal(err)
		case time.Now().After(deadline):
			t.Fatal("the round never waited for the lock")
		}
		select {
		case err := <-done:
			t.Fatalf("Reserve returned (%v) while the meta row was locked", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
