package testutil

import (
	"errors"
	"os"
	"testing"

	"github.com/carmyhq/carmy/tests/pgtest"
)

// NeedPostgres starts a PostgreSQL server for tb (pgtest.Start), stopped
// at its end, or skips tb loudly when the server binaries are missing — a
// failure instead with CI or CARMY_REQUIRE_POSTGRES=1 set (.ci/run sets it).
func NeedPostgres(tb testing.TB) *pgtest.Server {
	tb.Helper()
	srv, err := pgtest.Start()
	if errors.Is(err, pgtest.ErrNoPostgres) && os.Getenv("CI") == "" && os.Getenv("CARMY_REQUIRE_POSTGRES") != "1" {
		SkipLoudly(tb, "no PostgreSQL: %v (with CI or CARMY_REQUIRE_POSTGRES=1 set, this is a failure)", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := srv.Close(); err != nil {
			tb.Errorf("stopping PostgreSQL: %v", err)
		}
	})
	return srv
}
