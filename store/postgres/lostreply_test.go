package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
	"github.com/carmyhq/carmy/tests/pgtest"
)

// proxied opens a store that reaches the shared server through a proxy
// that can lose a reply.
func proxied(t *testing.T) (*postgres.Store, *pgtest.Proxy) {
	t.Helper()
	p, err := pgtest.NewProxy(needServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return openStore(t, p.DSN("postgres")+" pool_max_conns=2", postgres.Config{}), p
}

// wantDropped checks that the proxy dropped exactly one reply.
func wantDropped(t *testing.T, p *pgtest.Proxy) {
	t.Helper()
	if n := p.Dropped(); n != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1: the test did not test what it names", n)
	}
}

// TestCompleteCommittedReplyLost loses the server's answer to the COMMIT
// of Complete's transaction, which committed: Complete reports the outcome
// unknown (never a refusal), the result is recorded, and a retry finds it
// recorded.
func TestCompleteCommittedReplyLost(t *testing.T) {
	t.Parallel()
	s, p := proxied(t)
	ctx := context.Background()
	k := key("lost-complete")
	ex := newExecution("lost")
	mustReserve(t, s, k, "fp", ex, store.Reserved)
	res := completedResult(ex.ID, `{"order":"ord_3"}`)

	p.DropReplyTo([]byte("commit\x00"))
	_, err := s.Complete(ctx, k, "fp", res)
	wantDropped(t, p)
	if !errors.Is(err, store.ErrCommitUnknown) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Complete whose answer was lost: %v; want ErrCommitUnknown alone", err)
	}
	if rec, err := s.Lookup(ctx, k); err != nil || rec.Status != store.StatusCompleted || string(rec.Data) != string(res.Data) {
		t.Fatalf("Lookup = %+v, %v; want the committed result", rec, err)
	}
	_, err = s.Complete(ctx, k, "fp", res)
	var se *store.StateError
	if !errors.As(err, &se) || se.Record.ExecutionID != ex.ID || se.Record.Status != store.StatusCompleted {
		t.Fatalf("retry of Complete: %v; want a StateError naming %s, completed", err, ex.ID)
	}
}

// TestReserveCommitReplyLost loses the answer to Reserve's COMMIT: the
// reservation is made and Reserve says the outcome is unknown.
func TestReserveCommitReplyLost(t *testing.T) {
	t.Parallel()
	s, p := proxied(t)
	ctx := context.Background()
	k := key("lost-reservation")
	ex := newExecution("lost")
	p.DropReplyTo([]byte("commit\x00"))
	_, err := s.Reserve(ctx, k, "fp", ex)
	wantDropped(t, p)
	if !errors.Is(err, store.ErrCommitUnknown) {
		t.Fatalf("Reserve whose COMMIT answer was lost: %v; want ErrCommitUnknown", err)
	}
	if rec, err := s.Lookup(ctx, k); err != nil || rec.ExecutionID != ex.ID || rec.Status != store.StatusRunning {
		t.Fatalf("Lookup = %+v, %v; want the reservation, running", rec, err)
	}
	if st, err := s.Stats(ctx); err != nil || st.Entries != 1 {
		t.Fatalf("Stats = %+v, %v; want 1 entry", st, err)
	}
}

// TestReserveStatementReplyLost loses the answer to the statement that
// reserves, before COMMIT is sent: the transaction cannot commit, and
// Reserve says not applied.
func TestReserveStatementReplyLost(t *testing.T) {
	t.Parallel()
	s, p := proxied(t)
	ctx := context.Background()
	k := key("lost-statement")
	ex := newExecution("lost")
	p.DropReplyTo([]byte(ex.ID))
	_, err := s.Reserve(ctx, k, "fp", ex)
	wantDropped(t, p)
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrCommitUnknown) {
		t.Fatalf("Reserve whose statement's answer was lost: %v; want ErrUnavailable alone", err)
	}
	if _, err := s.Lookup(ctx, k); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Lookup: %v; want nothing reserved", err)
	}
	if st, err := s.Stats(ctx); err != nil || st.Entries != 0 {
		t.Fatalf("Stats = %+v, %v; want 0 entries", st, err)
	}
	mustReserve(t, s, k, "fp", newExecution("lost"), store.Reserved)
}

// TestReleaseCommitReplyLost loses the answer to Release's COMMIT: the
// outcome is unknown, and the record is gone.
func TestReleaseCommitReplyLost(t *testing.T) {
	t.Parallel()
	s, p := proxied(t)
	ctx := context.Background()
	k := key("lost-release")
	ex := newExecution("lost")
	mustReserve(t, s, k, "fp", ex, store.Reserved)
	p.DropReplyTo([]byte("commit\x00"))
	_, err := s.Release(ctx, ex.ID, true)
	wantDropped(t, p)
	if !errors.Is(err, store.ErrCommitUnknown) {
		t.Fatalf("Release whose COMMIT answer was lost: %v; want ErrCommitUnknown", err)
	}
	if _, err := s.Get(ctx, ex.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get: %v; want the record released", err)
	}
	if st, err := s.Stats(ctx); err != nil || st.Entries != 0 {
		t.Fatalf("Stats = %+v, %v; want 0 entries", st, err)
	}
}
