package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
)

// versions returns the versions recorded in a store's schema_version.
func versions(t *testing.T, pool *pgxpool.Pool, s *postgres.Store) []int {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT version FROM "+table(s, "schema_version")+" ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// allVersions is every version a new store's schema_version records: a
// new store applies each migration in turn.
func allVersions() []int {
	var vs []int
	for v := 1; v <= postgres.SchemaVersion; v++ {
		vs = append(vs, v)
	}
	return vs
}

// TestConcurrentOpens opens one new schema from many processes at once:
// every Open succeeds, the schema is created and each version applied
// once, and the stores share their records.
func TestConcurrentOpens(t *testing.T) {
	t.Parallel()
	srv := needServer(t)
	schema := freshSchema()
	const opens = 12
	var (
		wg     sync.WaitGroup
		stores = make([]*postgres.Store, opens)
		errs   = make([]error, opens)
		start  = make(chan struct{})
	)
	for i := range opens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stores[i], errs[i] = postgres.Open(context.Background(), srv.DSN("postgres"),
				postgres.Config{Schema: schema, Logger: quiet})
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(stores[i].Close)
	}
	admin := adminPool(t, srv)
	if got := versions(t, admin, stores[0]); !slices.Equal(got, allVersions()) {
		t.Fatalf("schema_version holds %v, want %v", got, allVersions())
	}
	ex := newExecution("mig")
	mustReserve(t, stores[0], key("shared"), "fp", ex, store.Reserved)
	if rec, err := stores[opens-1].Lookup(context.Background(), key("shared")); err != nil || rec.ExecutionID != ex.ID {
		t.Fatalf("another process's Lookup = %+v, %v", rec, err)
	}
}

// TestReopen checks that opening migrated tables again changes nothing and
// keeps the records, and that tables newer than this build are refused.
func TestReopen(t *testing.T) {
	t.Parallel()
	srv := needServer(t)
	cfg := postgres.Config{Schema: freshSchema(), Logger: quiet}
	s := openStore(t, srv.DSN("postgres"), cfg)
	ex := newExecution("reopen")
	mustReserve(t, s, key("kept"), "fp", ex, store.Reserved)
	s.Close()

	again := openStore(t, srv.DSN("postgres"), cfg)
	if rec, err := again.Lookup(context.Background(), key("kept")); err != nil || rec.ExecutionID != ex.ID {
		t.Fatalf("Lookup after reopening = %+v, %v", rec, err)
	}
	admin := adminPool(t, srv)
	if got := versions(t, admin, again); !slices.Equal(got, allVersions()) {
		t.Fatalf("schema_version holds %v after reopening, want %v", got, allVersions())
	}
	rec := mustReserve(t, again, key("next"), "fp", newExecution("reopen"), store.Reserved)
	if rec.Seq != 2 {
		t.Fatalf("seq after reopening = %d, want 2", rec.Seq)
	}

	if _, err := admin.Exec(context.Background(), "INSERT INTO "+table(again, "schema_version")+" (version) VALUES (99)"); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(context.Background(), srv.DSN("postgres"), cfg)
	if err == nil || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("Open of tables at version 99: %v, want a refusal naming it", err)
	}
}

// TestOpenUnreachable checks that a server that cannot be reached is
// store.ErrUnavailable, and a default Config is the default capacity in
// the connection's current schema.
func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	srv := needServer(t)
	_, err := postgres.Open(context.Background(), "host="+t.TempDir()+" user=carmy dbname=postgres connect_timeout=5", postgres.Config{Logger: quiet})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open of a socket nobody serves: %v, want ErrUnavailable", err)
	}
	// A database of its own, so that the current schema (public) is this
	// test's alone.
	admin := adminPool(t, srv)
	db := "defaults_" + freshSchema()
	if _, err := admin.Exec(context.Background(), "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(context.Background(), srv.DSN(db), postgres.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustReserve(t, s, key("default"), "fp", newExecution("default"), store.Reserved)
	if s.Schema() != "public" || s.Capacity() != store.DefaultCapacity {
		t.Fatalf("default store: schema %q, capacity %d", s.Schema(), s.Capacity())
	}
}

// TestMigrateToByteAccounting opens tables at version 1 (made by a build
// before byte accounting, here by undoing version 2) that hold records of
// two principals: version 2 computes the store's and each principal's
// bytes from the records, equal to store.RecordSize summed over them, and
// later writes keep them so.
func TestMigrateToByteAccounting(t *testing.T) {
	t.Parallel()
	srv := needServer(t)
	ctx := context.Background()
	cfg := postgres.Config{Schema: freshSchema(), Logger: quiet}
	s := openStore(t, srv.DSN("postgres"), cfg)
	bob := store.Key{Principal: "bob", Session: "s", RequestID: "b"}
	exA, exB := newExecution("mig"), newExecution("mig")
	mustReserve(t, s, key("a"), "fp", exA, store.Reserved)
	mustReserve(t, s, bob, "fp", exB, store.Reserved)
	if _, err := s.Complete(ctx, key("a"), "fp", completedResult(exA.ID, `{"order":"ord_1"}`)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	admin := adminPool(t, srv)
	for _, sql := range []string{
		"ALTER TABLE " + table(s, "meta") + " DROP COLUMN bytes",
		"ALTER TABLE " + table(s, "principals") + " DROP COLUMN bytes",
		"DELETE FROM " + table(s, "schema_version") + " WHERE version >= 2",
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}

	again := openStore(t, srv.DSN("postgres"), cfg)
	var want int64
	for _, k := range []store.Key{key("a"), bob} {
		rec, err := again.Lookup(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		want += store.RecordSize(rec)
	}
	if st, err := again.Stats(ctx); err != nil || st.Bytes != want || st.Entries != 2 {
		t.Fatalf("Stats after the migration = %+v, %v; want %d bytes in 2 entries", st, err, want)
	}
	// bob's bytes were computed too: a quota of exactly his record and
	// one byte of headroom more is refused, his record's size is not.
	recB, _ := again.Lookup(ctx, bob)
	ex := newExecution("mig")
	next := store.Key{Principal: "bob", Session: "s", RequestID: "b2"}
	size := store.RecordSize(store.Record{Key: next, ExecutionID: ex.ID, Tool: ex.Tool, Fingerprint: "fp", NodeID: ex.NodeID})
	ex.ByteQuota, ex.Headroom = store.RecordSize(recB)+size, 1
	if _, err := again.Reserve(ctx, next, "fp", ex); !errors.Is(err, store.ErrCapacity) {
		t.Fatalf("a reservation one byte over bob's quota: %v, want IDEMPOTENCY_CAPACITY", err)
	}
	ex.Headroom = 0
	mustReserve(t, again, next, "fp", ex, store.Reserved)
}
