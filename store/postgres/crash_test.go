package postgres_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
	"github.com/carmyhq/carmy/tests/pgtest"
	"github.com/carmyhq/carmy/tests/testutil"
)

// storeDown reports whether err is what a write may return while the
// server is gone: not applied, or outcome unknown.
func storeDown(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrCommitUnknown)
}

// eventually retries fn until it returns nil, while it fails only as a
// store with no server does, for up to 30 seconds: after a restart, pooled
// connections to the old server fail once each before the pool replaces
// them.
func eventually(t *testing.T, what string, fn func(ctx context.Context) error) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := fn(ctx)
		if err != nil && !storeDown(err) {
			t.Fatalf("%s: %v", what, err)
		}
		return err
	})
}

// settle completes an execution whose Complete had an unknown outcome, as
// the runtime does: a retry either records the result or finds it
// recorded (a StateError naming this execution, completed).
func settle(t *testing.T, s store.Store, k store.Key, res store.Result) {
	t.Helper()
	eventually(t, "Complete again", func(ctx context.Context) error {
		_, err := s.Complete(ctx, k, "fp", res)
		var se *store.StateError
		if errors.As(err, &se) && se.Record.ExecutionID == res.ExecutionID && se.Record.Status == store.StatusCompleted {
			return nil
		}
		return err
	})
	var rec store.Record
	eventually(t, "Lookup", func(ctx context.Context) (err error) {
		rec, err = s.Lookup(ctx, k)
		return err
	})
	if rec.Status != store.StatusCompleted || string(rec.Data) != string(res.Data) || rec.ExecutionID != res.ExecutionID {
		t.Fatalf("after settling: %+v, want %s completed with %s", rec, res.ExecutionID, res.Data)
	}
	if r, err := s.Reserve(context.Background(), k, "fp", newExecution("retry")); err != nil || r.Outcome != store.Replay {
		t.Fatalf("a retry of the call: %v, %v; want the replay", r.Outcome, err)
	}
}

// lookupAfterRestart reads a record from a restarted server.
func lookupAfterRestart(t *testing.T, s store.Store, k store.Key) store.Record {
	t.Helper()
	var rec store.Record
	eventually(t, "Lookup after restart", func(ctx context.Context) (err error) {
		rec, err = s.Lookup(ctx, k)
		return err
	})
	return rec
}

// TestServerStopped stops a server of its own between a reservation and
// its completion, and while the completion is in flight. (One server for
// both: initdb is the slow part.)
func TestServerStopped(t *testing.T) {
	t.Parallel()
	srv := needOwnServer(t)
	s := openStore(t, srv.DSN("postgres")+" connect_timeout=5", postgres.Config{})
	t.Run("between reserve and complete", func(t *testing.T) { testStoppedBetween(t, srv, s) })
	t.Run("during complete", func(t *testing.T) { testStoppedDuring(t, srv, s) })
}

// testStoppedBetween stops the server after a reservation: Complete fails
// as not applied or unknown, never succeeds; after a restart the record is
// still running, and a retry of Complete records the result.
func testStoppedBetween(t *testing.T, srv *pgtest.Server, s *postgres.Store) {
	for _, stop := range []struct {
		name string
		sig  syscall.Signal
	}{{"kill -9", syscall.SIGKILL}, {"immediate shutdown", syscall.SIGQUIT}} {
		t.Run(stop.name, func(t *testing.T) {
			k := key("between-" + stop.name)
			ex := newExecution("between")
			mustReserve(t, s, k, "fp", ex, store.Reserved)
			if err := srv.Stop(stop.sig); err != nil {
				t.Fatal(err)
			}
			res := completedResult(ex.ID, `{"order":"ord_1"}`)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := s.Complete(ctx, k, "fp", res)
			cancel()
			if err == nil && stop.sig == syscall.SIGKILL {
				// kill -9 of the postmaster leaves its backends alive until
				// they notice: a pooled connection's backend may still
				// commit. Success is then the truth, and must survive the
				// restart.
				restart(t, srv)
				if rec := lookupAfterRestart(t, s, k); rec.Status != store.StatusCompleted || string(rec.Data) != string(res.Data) {
					t.Fatalf("Complete succeeded while the postmaster was dead, but after restart: %+v", rec)
				}
				return
			}
			if !storeDown(err) {
				t.Fatalf("Complete with the server down: %v; want ErrUnavailable or ErrCommitUnknown", err)
			}
			t.Logf("Complete with the server down: %v", err)
			restart(t, srv)
			if rec := lookupAfterRestart(t, s, k); rec.Status != store.StatusRunning || rec.ExecutionID != ex.ID {
				t.Fatalf("after restart: %+v, want %s still running", rec, ex.ID)
			}
			settle(t, s, k, res)
		})
	}
}

// testStoppedDuring holds the record's row lock from another connection,
// so that Complete's UPDATE is on the server, waiting, when the server (or
// its backend) goes away. The UPDATE runs in a transaction (it holds the
// meta row, for the byte counts), so a connection lost before its COMMIT
// was sent means not applied (store.ErrUnavailable, never also unknown);
// Complete reports the outcome unknown only when the COMMIT was sent, and
// success only when it committed.
func testStoppedDuring(t *testing.T, srv *pgtest.Server, s *postgres.Store) {
	cases := []struct {
		name string
		stop func(t *testing.T, waiting int32)
		// exact: the UPDATE cannot have committed, so Complete must say
		// not applied and the record stay running.
		exact bool
	}{
		{"backend terminated", func(t *testing.T, pid int32) {
			if _, err := adminPool(t, srv).Exec(context.Background(), "SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
		}, true},
		// Every backend gets SIGQUIT and exits at once: the lock is never
		// released to the waiting UPDATE.
		{"immediate shutdown", func(t *testing.T, _ int32) { stopServer(t, srv, syscall.SIGQUIT) }, true},
		// Backends exit when they notice: the lock holder may exit first
		// and the UPDATE commit before its backend notices.
		{"kill -9", func(t *testing.T, _ int32) { stopServer(t, srv, syscall.SIGKILL) }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := key("during-" + c.name)
			ex := newExecution("during")
			mustReserve(t, s, k, "fp", ex, store.Reserved)
			holder := lockRecord(t, srv, s, ex.ID)
			defer holder.Close(context.Background())

			res := completedResult(ex.ID, `{"order":"ord_2"}`)
			done := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				_, err := s.Complete(ctx, k, "fp", res)
				done <- err
			}()
			c.stop(t, waitingUpdate(t, srv, done))
			err := <-done
			holder.Close(context.Background()) // its transaction never commits
			switch {
			case c.exact && (!errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrCommitUnknown)):
				t.Fatalf("Complete whose connection was lost before its COMMIT: %v; want ErrUnavailable (not applied) alone", err)
			case err != nil && !storeDown(err):
				t.Fatalf("Complete whose connection was lost in flight: %v; want success, ErrUnavailable or ErrCommitUnknown", err)
			}
			restart(t, srv)
			rec := lookupAfterRestart(t, s, k)
			switch {
			case err == nil && rec.Status != store.StatusCompleted:
				t.Fatalf("Complete succeeded, but after restart the record is %s", rec.Status)
			case (c.exact || errors.Is(err, store.ErrUnavailable) && !errors.Is(err, store.ErrCommitUnknown)) && rec.Status != store.StatusRunning:
				t.Fatalf("after restart: %s, want running (Complete said not applied: %v)", rec.Status, err)
			}
			t.Logf("Complete: %v; after restart: %s", err, rec.Status)
			settle(t, s, k, res)
		})
	}
}

// lockRecord locks an execution's row from a connection of its own, in a
// transaction left open.
func lockRecord(t *testing.T, srv *pgtest.Server, s *postgres.Store, executionID string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	tag, err := conn.Exec(ctx, "SELECT 1 FROM "+table(s, "records")+" WHERE execution_id = $1 FOR UPDATE", executionID)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("locking %s: %v, %v", executionID, tag, err)
	}
	return conn
}

// waitingUpdate returns the backend of a statement that updates (an
// UPDATE, or a WITH whose parts do) waiting for a lock, once there is one.
func waitingUpdate(t *testing.T, srv *pgtest.Server, done <-chan error) int32 {
	t.Helper()
	admin := adminPool(t, srv)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pid int32
		err := admin.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND (query LIKE 'UPDATE%' OR query LIKE 'WITH%') LIMIT 1`).Scan(&pid)
		switch {
		case err == nil:
			admin.Close()
			return pid
		case !errors.Is(err, pgx.ErrNoRows):
			t.Fatal(err)
		case time.Now().After(deadline):
			t.Fatal("Complete's UPDATE never waited for the lock")
		}
		select {
		case err := <-done:
			t.Fatalf("Complete returned (%v) while the record was locked", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func stopServer(t *testing.T, srv *pgtest.Server, sig syscall.Signal) {
	t.Helper()
	if err := srv.Stop(sig); err != nil {
		t.Fatal(err)
	}
}

// restart starts a stopped server again; a server that is running is left
// alone.
func restart(t *testing.T, srv *pgtest.Server) {
	t.Helper()
	if srv.Running() {
		return
	}
	if err := srv.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
}
