package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
	"github.com/carmyhq/carmy/store/postgres"
)

// countRows counts the rows of a store's table, read directly (not
// through the store, which would chain first).
func countRows(tb testing.TB, pool *pgxpool.Pool, s *postgres.Store, name string) int {
	tb.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table(s, name)).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// waitFor polls cond every 10 ms until it holds, failing tb after
// deadline.
func waitFor(tb testing.TB, deadline time.Duration, what string, cond func() bool) {
	tb.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			tb.Fatalf("%s: not within %v", what, deadline)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLedgerChainThreeStores: three stores on one database (one chaining
// in the background every millisecond, one at the default interval, one
// never), each with many callers reserving and completing at once: the
// export verifies, with each decision's entry exactly once, seqs dense
// from 1, and the queue empty.
func TestLedgerChainThreeStores(t *testing.T) {
	srv := needServer(t)
	schema := freshSchema()
	dsn := srv.DSN("postgres") + " pool_max_conns=6"
	stores := []*postgres.Store{
		openStore(t, dsn, postgres.Config{Schema: schema, NodeID: "n1", LedgerChainEvery: time.Millisecond, Rounds: 2}),
		openStore(t, dsn, postgres.Config{Schema: schema, NodeID: "n2"}),
		openStore(t, dsn, postgres.Config{Schema: schema, NodeID: "n3", LedgerChainEvery: -1}),
	}
	ctx := context.Background()
	const callers, calls = 8, 12
	var wg sync.WaitGroup
	errs := make(chan error, len(stores)*callers*calls)
	for n, s := range stores {
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range calls {
					id := fmt.Sprintf("n%d-%d-%d", n+1, c, j)
					key := store.Key{Principal: "alice", Session: "s", RequestID: id}
					exec := store.Execution{ID: "exec_" + id, Tool: "echo", NodeID: fmt.Sprintf("n%d", n+1), StartedAt: time.Now().UTC()}
					if res, err := s.Reserve(ctx, key, "fp", exec); err != nil || res.Outcome != store.Reserved {
						errs <- fmt.Errorf("reserve %s: %v %v", id, res.Outcome, err)
						return
					}
					if _, err := s.Complete(ctx, key, "fp", store.Result{ExecutionID: exec.ID, Status: store.StatusCompleted,
						Data: []byte(`{}`), FinishedAt: time.Now().UTC()}); err != nil {
						errs <- fmt.Errorf("complete %s: %w", id, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	export := exportAll(t, stores[2])
	v, err := audit.Verify(bytes.NewReader(export))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	want := len(stores) * callers * calls * 2
	if v.Entries != want || v.Head.Seq != uint64(want) {
		t.Fatalf("verified %d entries, head %d; want %d", v.Entries, v.Head.Seq, want)
	}
	seen := map[string][]audit.Kind{}
	for i, e := range entries(t, export) {
		if e.Seq != uint64(i+1) {
			t.Fatalf("entry %d has seq %d", i+1, e.Seq)
		}
		seen[e.ExecutionID] = append(seen[e.ExecutionID], e.Kind)
	}
	if len(seen) != len(stores)*callers*calls {
		t.Fatalf("%d executions in the ledger, want %d", len(seen), len(stores)*callers*calls)
	}
	for id, kinds := range seen {
		if len(kinds) != 2 || kinds[0] != audit.KindReserved || kinds[1] != audit.KindCompleted {
			t.Fatalf("%s: entries %v, want reserved then completed", id, kinds)
		}
	}
	if n := countRows(t, adminPool(t, srv), stores[0], "audit_queue"); n != 0 {
		t.Fatalf("%d rows still queued after the export", n)
	}
}

// TestLedgerRolledBackDraft: a decision whose transaction rolls back (its
// COMMIT fails, here by a deferred trigger) queued a draft that never
// reaches the chain; the decisions around it do.
func TestLedgerRolledBackDraft(t *testing.T) {
	srv := needServer(t)
	s := newStore(t, postgres.Config{NodeID: "n1"})
	admin := adminPool(t, srv)
	ctx := context.Background()
	fn := table(s, "doom")
	for _, sql := range []string{
		"CREATE FUNCTION " + fn + "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN " +
			"IF NEW.request_id = 'doomed' THEN RAISE EXCEPTION 'doomed'; END IF; RETURN NULL; END $$",
		"CREATE CONSTRAINT TRIGGER doom AFTER INSERT ON " + table(s, "records") +
			" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION " + fn + "()",
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	reserveOn(t, s, "n1", "before")
	_, err := s.Reserve(ctx, store.Key{Principal: "p", RequestID: "doomed"}, "fp",
		store.Execution{ID: "exec_doomed", Tool: "t", NodeID: "n1", StartedAt: time.Now().UTC()})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Reserve of the doomed call: %v, want ErrUnavailable", err)
	}
	reserveOn(t, s, "n1", "after")
	export := exportAll(t, s)
	if _, err := audit.Verify(bytes.NewReader(export)); err != nil {
		t.Fatal(err)
	}
	es := entries(t, export)
	if len(es) != 2 || es[0].ExecutionID != "exec_n1_before" || es[1].ExecutionID != "exec_n1_after" {
		t.Fatalf("entries %+v, want before's and after's only", es)
	}
	if n := countRows(t, admin, s, "audit_queue"); n != 0 {
		t.Fatalf("%d rows queued, want none", n)
	}
}

// TestLedgerChainPassFails: a pass stopped midway (its context cancelled
// while its insert into the chain waits for a lock, after it deleted the
// queued rows) leaves the queue and the head as they were; the next read
// chains every draft exactly once.
func TestLedgerChainPassFails(t *testing.T) {
	srv := needServer(t)
	s := newStore(t, postgres.Config{NodeID: "n1", LedgerChainEvery: -1})
	admin := adminPool(t, srv)
	ctx := context.Background()
	for i := range 5 {
		reserveOn(t, s, "n1", fmt.Sprint(i))
	}
	queued := countRows(t, admin, s, "audit_queue")
	if queued == 0 || countRows(t, admin, s, "audit") != 0 {
		t.Fatalf("%d rows queued, %d chained; want the drafts queued only", queued, countRows(t, admin, s, "audit"))
	}
	// Another session holds the chain's table: the pass's insert waits.
	blocker, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx)
	if _, err := blocker.Exec(ctx, "LOCK TABLE "+table(s, "audit")+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.AuditHead(rctx)
		done <- err
	}()
	waitFor(t, 10*time.Second, "the pass waiting for the chain's table", func() bool {
		var waiting bool
		err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND relation = $1::regclass)",
			table(s, "audit")).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	cancel()
	if err := <-done; !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("AuditHead with its pass cancelled: %v, want ErrUnavailable", err)
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The cancelled pass's transaction ends on its own connection; wait
	// for it before counting.
	waitFor(t, 10*time.Second, "the queue restored", func() bool {
		return countRows(t, admin, s, "audit_queue") == queued
	})
	var seq int64
	if err := admin.QueryRow(ctx, "SELECT seq FROM "+table(s, "audit_head")).Scan(&seq); err != nil || seq != 0 {
		t.Fatalf("head seq %d %v after the failed pass, want 0", seq, err)
	}
	export := exportAll(t, s)
	v, err := audit.Verify(bytes.NewReader(export))
	if err != nil || v.Entries != 5 || v.Head.Seq != 5 {
		t.Fatalf("verify after the failed pass: %+v %v, want 5 entries", v, err)
	}
	for i, e := range entries(t, export) {
		if want := fmt.Sprint("exec_n1_", i); e.ExecutionID != want {
			t.Fatalf("entry %d is %s, want %s", e.Seq, e.ExecutionID, want)
		}
	}
	if n := countRows(t, admin, s, "audit_queue"); n != 0 {
		t.Fatalf("%d rows queued after the read, want none", n)
	}
}

// TestLedgerChainsInBackground: a reservation with no read after it
// joins the chain on its own (the store's background pass), its time to
// the nanosecond.
func TestLedgerChainsInBackground(t *testing.T) {
	srv := needServer(t)
	s := newStore(t, postgres.Config{NodeID: "n1"})
	admin := adminPool(t, srv)
	at := time.Date(2026, 12, 7, 5, 0, 0, 123456789, time.UTC)
	if _, err := s.Reserve(context.Background(), store.Key{Principal: "p", RequestID: "bg"}, "fp",
		store.Execution{ID: "exec_bg", Tool: "t", NodeID: "n1", StartedAt: at}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the queue emptied in the background", func() bool {
		return countRows(t, admin, s, "audit_queue") == 0
	})
	if n := countRows(t, admin, s, "audit"); n != 1 {
		t.Fatalf("%d entries chained, want 1", n)
	}
	es := entries(t, exportAll(t, s))
	if len(es) != 1 || !es[0].Time.Equal(at) || es[0].ExecutionID != "exec_bg" {
		t.Fatalf("entries %+v, want exec_bg's at %v", es, at)
	}
}

// appendDirect appends d as a node of schema version 8 does: in one
// transaction, under the head row, straight onto the chain.
func appendDirect(pool *pgxpool.Pool, s *postgres.Store, d audit.Draft) error {
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var (
		seq  int64
		head audit.Head
	)
	if err := tx.QueryRow(ctx, "SELECT seq, hash FROM "+table(s, "audit_head")+" WHERE singleton FOR UPDATE").Scan(&seq, &head.Hash); err != nil {
		return err
	}
	head.Seq = uint64(seq)
	e, head := head.Next(d, nil)
	if _, err := tx.Exec(ctx, "INSERT INTO "+table(s, "audit")+" (seq, at, line) VALUES ($1, $2, $3)", int64(e.Seq), e.Time, e.Line(nil)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "UPDATE "+table(s, "audit_head")+" SET seq = $1, hash = $2 WHERE singleton", int64(head.Seq), head.Hash); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// TestMigrateToQueuedLedger opens tables at version 8 (here by undoing
// version 9) whose chain holds entries: version 9 adds the queue and keeps
// the chain as it was; new entries follow it, while a node of version 8
// appending directly under the head row at the same time still yields one
// verifying chain.
func TestMigrateToQueuedLedger(t *testing.T) {
	srv := needServer(t)
	ctx := context.Background()
	cfg := postgres.Config{Schema: freshSchema(), Logger: quiet, NodeID: "n1"}
	s := openStore(t, srv.DSN("postgres"), cfg)
	for i := range 3 {
		reserveOn(t, s, "n1", fmt.Sprint("before", i))
	}
	before := exportAll(t, s)
	s.Close()
	admin := adminPool(t, srv)
	for _, sql := range []string{
		"DROP TABLE " + table(s, "audit_queue"),
		"DELETE FROM " + table(s, "schema_version") + " WHERE version >= 9",
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	again := openStore(t, srv.DSN("postgres"), cfg)
	if got := versions(t, admin, again); len(got) != postgres.SchemaVersion || got[len(got)-1] != 9 {
		t.Fatalf("versions after the migration: %v", got)
	}
	if after := exportAll(t, again); !bytes.Equal(after, before) {
		t.Fatalf("the chain changed in the migration:\n%s\nwas\n%s", after, before)
	}
	const each = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range each {
			d := audit.Draft{Time: time.Now(), Kind: audit.KindReserved, Actor: "old", ExecutionID: fmt.Sprint("exec_old_", i),
				Principal: "p", Tool: "t", Fingerprint: "fp"}
			if err := appendDirect(admin, again, d); err != nil {
				errs <- fmt.Errorf("direct append %d: %w", i, err)
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := range each {
			_, err := again.Reserve(ctx, store.Key{Principal: "p", RequestID: fmt.Sprint("new", i)}, "fp",
				store.Execution{ID: fmt.Sprint("exec_new_", i), Tool: "t", NodeID: "n1", StartedAt: time.Now().UTC()})
			if err != nil {
				errs <- fmt.Errorf("reserve %d: %w", i, err)
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	export := exportAll(t, again)
	if !bytes.HasPrefix(export, before) {
		t.Fatalf("the export does not begin with the chain before the migration")
	}
	v, err := audit.Verify(bytes.NewReader(export))
	if err != nil || v.Entries != 3+2*each || v.Head.Seq != uint64(3+2*each) {
		t.Fatalf("verify: %+v %v, want %d entries", v, err, 3+2*each)
	}
	ids := map[string]bool{}
	for _, e := range entries(t, export) {
		if ids[e.ExecutionID] {
			t.Fatalf("%s twice in the chain", e.ExecutionID)
		}
		ids[e.ExecutionID] = true
	}
	for i := range each {
		if !ids[fmt.Sprint("exec_old_", i)] || !ids[fmt.Sprint("exec_new_", i)] {
			t.Fatalf("entry %d of the old node or the new missing: %v", i, ids)
		}
	}
}

// TestLedgerChainBatches: more queued rows than one pass takes are
// chained by a read, in several passes, each once, in the queue's order.
func TestLedgerChainBatches(t *testing.T) {
	srv := needServer(t)
	s := newStore(t, postgres.Config{NodeID: "n1", LedgerChainEvery: -1})
	admin := adminPool(t, srv)
	const rows = 2500
	drafts := make([][]byte, rows)
	for i := range drafts {
		d := audit.Draft{Time: time.Unix(1800000000, int64(i)).UTC(), Kind: audit.KindReserved, Actor: "p",
			ExecutionID: fmt.Sprint("exec_", i), Principal: "p", Tool: "t", Fingerprint: "fp", Status: "running"}
		drafts[i] = d.Canonical(nil)
	}
	if _, err := admin.Exec(context.Background(), "INSERT INTO "+table(s, "audit_queue")+
		" (drafts) SELECT ARRAY[d] FROM unnest($1::bytea[]) WITH ORDINALITY AS u(d, i) ORDER BY i", drafts); err != nil {
		t.Fatal(err)
	}
	export := exportAll(t, s)
	v, err := audit.Verify(bytes.NewReader(export))
	if err != nil || v.Entries != rows {
		t.Fatalf("verify: %+v %v, want %d entries", v, err, rows)
	}
	for i, e := range entries(t, export) {
		if want := fmt.Sprint("exec_", i); e.ExecutionID != want || e.Time.Nanosecond() != i {
			t.Fatalf("entry %d: %s at %v, want %s", e.Seq, e.ExecutionID, e.Time, want)
		}
	}
	if n := countRows(t, admin, s, "audit_queue"); n != 0 {
		t.Fatalf("%d rows queued after the read, want none", n)
	}
}
