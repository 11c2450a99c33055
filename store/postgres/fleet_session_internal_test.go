package postgres

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/pgtest"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// TestFleetIdleTransactionReleased: a fleet node that falls silent in the
// middle of a write transaction (as a node cut off the network does, its
// session left open on the server) holds the meta row only until its
// lease has passed; the other nodes' writes then go through, and the
// silent session is gone. Without the bound they waited for as long as
// the server kept the session: hours.
func TestFleetIdleTransactionReleased(t *testing.T) {
	srv, err := pgtest.Start()
	switch {
	case errors.Is(err, pgtest.ErrNoPostgres) && os.Getenv("CI") == "" && os.Getenv("CARMY_REQUIRE_POSTGRES") != "1":
		t.Skipf("SKIPPED: no PostgreSQL server: %v", err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	const lease = time.Second
	a := runFleetNode(t, srv.DSN("postgres"), "a", lease)
	b := runFleetNode(t, srv.DSN("postgres"), "b", lease)

	now := time.Now().UTC().Truncate(time.Millisecond)
	res, err := b.Reserve(context.Background(), store.Key{Principal: "p", RequestID: "r"}, "fp",
		store.Execution{ID: "exec_b_r", Tool: "t", NodeID: "b", StartedAt: now})
	if err != nil || res.Outcome != store.Reserved {
		t.Fatalf("reserve on b: %v %v", res.Outcome, err)
	}

	// Node a begins a write and goes silent holding the meta row.
	ctx := context.Background()
	conn, err := a.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, a.st.Load().q.lockMeta); err != nil {
		t.Fatal(err)
	}

	// b's release needs the meta row: it waits out a's lease, then applies.
	rctx, cancel := context.WithTimeout(ctx, 20*lease)
	defer cancel()
	if _, err := b.Release(rctx, res.Record.ExecutionID, true); err != nil {
		t.Fatalf("release on b while a silent transaction held the meta row: %v (want it applied once a's lease passed)", err)
	}
	if _, err := b.Lookup(ctx, store.Key{Principal: "p", RequestID: "r"}); err == nil {
		t.Fatal("the released identity still has a record")
	}
	// The server ended a's silent session; its transaction applied nothing.
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the silent transaction committed after the server should have ended it")
	}
}

// runFleetNode runs a fleet node on dsn until the test ends and waits
// until it is ready.
func runFleetNode(t *testing.T, dsn, nodeID string, lease time.Duration) *Fleet {
	t.Helper()
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	f, err := NewFleet(pc, Config{Schema: "idle_tx", Logger: quiet},
		FleetConfig{NodeID: nodeID, HTTPAddr: "127.0.0.1:1", Version: "test", Lease: lease, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run %s: %v", nodeID, err)
		}
		f.Close()
	})
	wait.For(t, 30*time.Second, "fleet node "+nodeID+" ready", func() error { return f.Ready(context.Background()) })
	return f
}
