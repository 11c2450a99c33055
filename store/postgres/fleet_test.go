package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
	"github.com/carmyhq/carmy/tests/testutil"
)

// startFleet runs a fleet node in schema until the returned stop is
// called (or tb ends).
func startFleet(tb testing.TB, dsn, schema, nodeID string, lease time.Duration) (*postgres.Fleet, func()) {
	tb.Helper()
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := postgres.NewFleet(pc, postgres.Config{Schema: schema, Logger: quiet},
		postgres.FleetConfig{NodeID: nodeID, HTTPAddr: "127.0.0.1:1", Version: "test", Lease: lease, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run: %v", err)
		}
		f.Close()
	}
	tb.Cleanup(stop)
	return f, stop
}

func reserveOn(tb testing.TB, s store.Store, node, requestID string) store.Record {
	tb.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	res, err := s.Reserve(context.Background(), store.Key{Principal: "p", RequestID: requestID}, "fp-"+requestID,
		store.Execution{ID: "exec_" + node + "_" + requestID, Tool: "t", NodeID: node, StartedAt: now})
	if err != nil || res.Outcome != store.Reserved {
		tb.Fatalf("reserve %s on %s: %v %v", requestID, node, res.Outcome, err)
	}
	return res.Record
}

// TestFleetLiveness: a fleet node refuses until it has opened the tables
// and beaten; a node that stops beating is seen dead by the other, which
// marks its running executions interrupted and calls its runner gone; a
// cancel recorded through one node reaches the other's OnCancel; exactly
// one of them holds the prober lock, and the survivor takes it.
func TestFleetLiveness(t *testing.T) {
	srv := needServer(t)
	dsn, schema := srv.DSN("postgres"), freshSchema()
	const lease = time.Second

	// Not open yet: unavailable, and not ready.
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	idle, err := postgres.NewFleet(pc, postgres.Config{Schema: schema}, postgres.FleetConfig{NodeID: "idle"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idle.Get(context.Background(), "exec_x"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get before Run: %v, want ErrUnavailable", err)
	}
	if err := idle.Ready(context.Background()); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ready before Run: %v, want ErrUnavailable", err)
	}
	idle.Close()

	a, stopA := startFleet(t, dsn, schema, "a", lease)
	b, _ := startFleet(t, dsn, schema, "b", lease)
	for _, f := range []*postgres.Fleet{a, b} {
		testutil.WaitUntil(t, 30*time.Second, "ready", func() bool { return f.Ready(context.Background()) == nil })
	}
	cancelled := make(chan string, 4)
	a.OnCancel(func(id string) { cancelled <- id })

	// A cancel asked through b reaches a.
	rec := reserveOn(t, a, "a", "to-cancel")
	testutil.WaitUntil(t, 10*time.Second, "a prober", func() bool { return a.ProbeOwner() || b.ProbeOwner() })
	if a.ProbeOwner() && b.ProbeOwner() {
		t.Fatal("both nodes hold the prober lock")
	}
	if _, err := b.Cancel(context.Background(), rec.ExecutionID, store.Result{ExecutionID: rec.ExecutionID, Status: store.StatusCancelled,
		Error: []byte(`{"code":"CANCELLED","message":"x"}`), FinishedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-cancelled:
		if id != rec.ExecutionID {
			t.Fatalf("OnCancel(%s), want %s", id, rec.ExecutionID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancel did not reach a")
	}

	// a stops beating with an execution running: b marks it interrupted.
	orphan := reserveOn(t, a, "a", "orphan")
	if b.RunnerGone("a") {
		t.Fatal("b holds a gone while it beats")
	}
	stopA()
	stopped := time.Now()
	testutil.WaitUntil(t, 10*time.Second, "a's execution interrupted", func() bool {
		r, err := b.Get(context.Background(), orphan.ExecutionID)
		return err == nil && r.Status == store.StatusInterrupted
	})
	t.Logf("interrupted %s after a stopped (lease %s)", time.Since(stopped).Round(time.Millisecond), lease)
	testutil.WaitUntil(t, 10*time.Second, "b to hold a gone", func() bool { return b.RunnerGone("a") })
	testutil.WaitUntil(t, 10*time.Second, "b to probe", b.ProbeOwner)
	nodes, err := b.Nodes(context.Background())
	if err != nil || len(nodes) != 2 || nodes[0].ID != "a" || nodes[0].Alive || !nodes[1].Alive || nodes[1].Version != "test" {
		t.Fatalf("Nodes = %+v, %v; want a dead, b alive", nodes, err)
	}
	if db := b.DatabaseStatus(context.Background()); !db.Reachable || db.Version == "" || db.Schema != schema {
		t.Fatalf("DatabaseStatus = %+v", db)
	}
}
