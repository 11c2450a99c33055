package postgres

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/pgtest"
)

// TestMillionRecords loads CARMY_PG_RECORDS records (1000000 for the
// measurement of docs/performance.md) into a store on a server of its own
// and checks that the statement of every kind of listing, and Expire's,
// reads the records through an index: no plan scans the whole table. It
// logs each plan with EXPLAIN ANALYZE. It runs only when CARMY_PG_RECORDS
// is set (loading a million records takes minutes):
//
//	CARMY_PG_RECORDS=1000000 go test -run TestMillionRecords -v -timeout 30m ./store/postgres
func TestMillionRecords(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv("CARMY_PG_RECORDS"))
	if err != nil || n <= 0 {
		t.Skip("set CARMY_PG_RECORDS to the number of records to load")
	}
	srv, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	s, err := Open(ctx, srv.DSN("postgres"), Config{Capacity: 2 * n})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	if _, err := s.pool.Exec(ctx, s.names.expand(loadRecordsSQL), n); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, s.names.expand("ANALYZE {records}")); err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %d records in %s", n, time.Since(start).Round(time.Second))
	var size string
	if err := s.pool.QueryRow(ctx, s.names.expand("SELECT pg_size_pretty(pg_total_relation_size('{records}'))")).Scan(&size); err != nil {
		t.Fatal(err)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Entries != n {
		t.Fatalf("Stats: %+v, %v; want %d entries", st, err, n)
	}
	t.Logf("records table and indexes: %s", size)

	// The listings of the API and the console (store.ListQuery), each
	// with the indexes it may use (space-separated), and the first page after a cursor in
	// the middle of the table.
	mid := uint64(n / 2)
	listings := []struct {
		name  string
		q     store.ListQuery
		index string
	}{
		{"one session of a principal", store.ListQuery{Principal: "p7", Session: "s7"}, "rec_psession"},
		{"every session of a principal", store.ListQuery{Principal: "p7", AllSessions: true}, "rec_pseq"},
		{"a session of every principal", store.ListQuery{AllPrincipals: true, Session: "s7"}, "rec_session"},
		{"a principal, one tool", store.ListQuery{Principal: "p7", AllSessions: true, Tool: "tool7"}, "rec_pseq rec_pkey"},
		// The worst case: every record of the principal read, none kept.
		{"a principal, a tool it never called", store.ListQuery{Principal: "p7", AllSessions: true, Tool: "tool3"}, "rec_pseq rec_pkey"},
		{"a principal, failed", store.ListQuery{Principal: "p7", AllSessions: true, Statuses: []store.Status{store.StatusFailed}}, "rec_pseq rec_pkey"},
		{"a principal, after a cursor", store.ListQuery{Principal: "p7", AllSessions: true, Before: mid}, "rec_pseq"},
		{"everything", store.ListQuery{AllPrincipals: true, AllSessions: true}, "rec_seq"},
		{"everything, after a cursor", store.ListQuery{AllPrincipals: true, AllSessions: true, Before: mid}, "rec_seq"},
		{"everything, one tool", store.ListQuery{AllPrincipals: true, AllSessions: true, Tool: "tool3"}, "rec_seq"},
		{"needs attention", store.ListQuery{AllPrincipals: true, AllSessions: true, Attention: true, GoneNodes: []string{"n1"}}, "rec_open"},
	}
	for _, l := range listings {
		sql, args, ok := s.listStatement(l.q, store.DefaultListLimit)
		if !ok {
			t.Fatalf("%s: no statement", l.name)
		}
		explain(t, s, l.name, l.index, sql, args...)
	}
	// Retention's cutoff past the oldest thousand records (as a daily
	// expiry of a store that keeps a few days), in a transaction rolled
	// back (EXPLAIN ANALYZE runs the DELETE).
	explain(t, s, "expire (retention)", "rec_finished", s.q.expire, time.Now().Add(-time.Duration(n-1000)*time.Second))
	explain(t, s, "running nodes (the sweep)", "rec_running", s.q.runningNodes)
}

// explain logs the plan of sql, run with EXPLAIN ANALYZE in a transaction
// rolled back, and fails t unless it reads the records through one of
// indexes (space-separated) and never scans the whole table.
func explain(t *testing.T, s *Store, name, indexes, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	plan := strings.Join(lines, "\n")
	t.Logf("%s:\n%s", name, plan)
	records := s.names.prefix + "records"
	if strings.Contains(plan, "Seq Scan on "+records) {
		t.Errorf("%s: the plan scans the whole table", name)
	}
	for _, index := range strings.Fields(indexes) {
		if strings.Contains(plan, " "+s.names.prefix+index+" ") {
			return
		}
	}
	t.Errorf("%s: the plan uses none of %s (with the prefix %s)", name, indexes, s.names.prefix)
}

// loadRecordsSQL fills an empty store's tables with $1 finished records
// (and the counts that go with them): 100 principals, 10,000 sessions, 20
// tools, one in ten failed and one in a thousand interrupted, one started
// every second up to now, on nodes n0 to n2. scripts/pgfleet loads the
// same records (CARMY_PGFLEET_RECORDS).
var loadRecordsSQL = `WITH ins AS (
	INSERT INTO {records} (principal, session_id, request_id, execution_id, seq, tool, fingerprint, status, node_id, started_at, finished_at, data)
	SELECT 'p' || (g % 100), 's' || (g % 10000), 'r' || g, 'x' || g, g, 'tool' || (g % 20), 'fp',
		CASE WHEN g % 1000 = 0 THEN 'interrupted' WHEN g % 10 = 0 THEN 'failed' ELSE 'completed' END,
		'n' || (g % 3), now() - ($1::bigint - g) * interval '1 second',
		CASE WHEN g % 1000 = 0 THEN NULL ELSE now() - ($1::bigint - g) * interval '1 second' + interval '5 milliseconds' END,
		CASE WHEN g % 1000 = 0 THEN NULL ELSE convert_to('{"echo":"' || g || '"}', 'UTF8') END
	FROM generate_series(1, $1::bigint) g
	RETURNING principal, ` + recordSizeSQL + ` AS size
), p AS (
	INSERT INTO {principals} (principal, entries, bytes) SELECT principal, count(*), sum(size) FROM ins GROUP BY principal
)
), m AS (
	UPDATE {meta} SET entries = (SELECT count(*) FROM ins), bytes = (SELECT sum(size) FROM ins), last_seq = $1::bigint WHERE singleton
)
SELECT setval('{seq}', $1::bigint)`
