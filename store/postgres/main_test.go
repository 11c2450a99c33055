package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy/store/postgres"
	"github.com/carmyhq/carmy/tests/pgtest"
	"github.com/carmyhq/carmy/tests/testutil"
)

// The package's tests share one server, started by TestMain in a temporary
// directory and stopped when they end; each test works in schemas of its
// own. Tests that stop the server start their own.
var (
	shared    *pgtest.Server
	sharedErr error
)

func TestMain(m *testing.M) { os.Exit(runTests(m)) }

func runTests(m *testing.M) int {
	srv, err := pgtest.Start()
	switch {
	case errors.Is(err, pgtest.ErrNoPostgres) && !requirePostgres():
		fmt.Fprintf(testutil.Loud(), "\n*** store/postgres: SKIPPING every test that needs PostgreSQL: %v\n"+
			"*** (with CI or CARMY_REQUIRE_POSTGRES=1 set, this is a failure)\n\n", err)
		sharedErr = err
		return m.Run()
	case err != nil:
		fmt.Fprintf(os.Stderr, "store/postgres: FAIL: cannot start a PostgreSQL server: %v\n", err)
		return 1
	}
	shared = srv
	code := m.Run()
	if err := srv.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "store/postgres: stopping the server: %v\n", err)
		code = max(code, 1)
	}
	return code
}

// requirePostgres says whether a missing server is a failure: in CI, or
// when CARMY_REQUIRE_POSTGRES=1.
func requirePostgres() bool {
	return os.Getenv("CI") != "" || os.Getenv("CARMY_REQUIRE_POSTGRES") == "1"
}

// needServer returns the shared server, or skips tb (loudly, once per
// test) when there is none.
func needServer(tb testing.TB) *pgtest.Server {
	tb.Helper()
	if shared == nil {
		tb.Skipf("SKIPPED: no PostgreSQL server: %v", sharedErr)
	}
	return shared
}

// needOwnServer starts a server for tb alone (for tests that stop it),
// stopped and removed at the end of tb.
func needOwnServer(tb testing.TB) *pgtest.Server {
	tb.Helper()
	needServer(tb)
	srv, err := pgtest.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := srv.Close(); err != nil {
			tb.Errorf("stopping the server: %v", err)
		}
	})
	return srv
}

var schemaSeq atomic.Int64

// freshSchema returns the name of a schema no test has used.
func freshSchema() string { return fmt.Sprintf("t%d", schemaSeq.Add(1)) }

// quiet is the tests' logger.
var quiet = slog.New(slog.DiscardHandler)

// openStore opens a store on dsn in cfg.Schema (a fresh schema when
// empty), closed at the end of tb.
func openStore(tb testing.TB, dsn string, cfg postgres.Config) *postgres.Store {
	tb.Helper()
	if cfg.Schema == "" {
		cfg.Schema = freshSchema()
	}
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	s, err := postgres.Open(context.Background(), dsn, cfg)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// newStore opens a store in a fresh schema of the shared server.
func newStore(tb testing.TB, cfg postgres.Config) *postgres.Store {
	tb.Helper()
	return openStore(tb, needServer(tb).DSN("postgres")+" pool_max_conns=8", cfg)
}

// adminPool is a pool on the shared server for the tests' own queries,
// closed at the end of tb.
func adminPool(tb testing.TB, srv *pgtest.Server) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), srv.DSN("postgres"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// table returns the quoted name of a store's table (records, meta,
// principals, leases, schema_version) with the default prefix.
func table(s *postgres.Store, name string) string {
	return pgx.Identifier{s.Schema(), postgres.DefaultTablePrefix + name}.Sanitize()
}

// counts reads a store's shared counters and the truth they count.
type counts struct {
	entries, records int64
	principals       map[string]int64 // the counters
	perPrincipal     map[string]int64 // the records
}

func readCounts(tb testing.TB, pool *pgxpool.Pool, s *postgres.Store) counts {
	tb.Helper()
	ctx := context.Background()
	c := counts{principals: map[string]int64{}, perPrincipal: map[string]int64{}}
	// The counts less the leases outstanding are the records' (leases.go).
	if err := pool.QueryRow(ctx, "SELECT entries - (SELECT coalesce(sum(entries), 0) FROM "+table(s, "leases")+" WHERE kind = 0) FROM "+
		table(s, "meta")).Scan(&c.entries); err != nil {
		tb.Fatal(err)
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table(s, "records")).Scan(&c.records); err != nil {
		tb.Fatal(err)
	}
	fill := func(sql string, into map[string]int64) {
		rows, err := pool.Query(ctx, sql)
		if err != nil {
			tb.Fatal(err)
		}
		var (
			p string
			n int64
		)
		if _, err := pgx.ForEachRow(rows, []any{&p, &n}, func() error {
			if n != 0 {
				into[p] = n
			}
			return nil
		}); err != nil {
			tb.Fatal(err)
		}
	}
	fill("SELECT pr.principal, pr.entries - (SELECT coalesce(sum(l.entries), 0) FROM "+table(s, "leases")+
		" l WHERE l.kind = 1 AND l.principal = pr.principal) FROM "+table(s, "principals")+" pr", c.principals)
	fill("SELECT principal, count(*) FROM "+table(s, "records")+" GROUP BY principal", c.perPrincipal)
	return c
}

// wantCountsExact checks that the counters match the records.
func wantCountsExact(tb testing.TB, c counts) {
	tb.Helper()
	if c.entries != c.records {
		tb.Fatalf("meta.entries = %d, but %d records", c.entries, c.records)
	}
	if len(c.principals) != len(c.perPrincipal) {
		tb.Fatalf("principal counters %v, records per principal %v", c.principals, c.perPrincipal)
	}
	for p, n := range c.perPrincipal {
		if c.principals[p] != n {
			tb.Fatalf("principal counters %v, records per principal %v", c.principals, c.perPrincipal)
		}
	}
}
