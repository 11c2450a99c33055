package testutil

import (
	"os"
	"testing"
)

// EnvLong is the switch of the long tier: the fault-injection harness, the
// console's browser tests, the Compose cluster and the process tests that
// kill nodes under load. `go test ./...` skips them (loudly) unless it is
// "1"; .ci/run sets it.
const EnvLong = "CARMY_TEST_LONG"

// LongTier skips tb, with a line a `go test` run shows without -v, unless
// the long tier is on ($CARMY_TEST_LONG=1). what says what did not run.
func LongTier(tb testing.TB, what string) {
	tb.Helper()
	if os.Getenv(EnvLong) == "1" {
		return
	}
	SkipLoudly(tb, "long tier (%s) not run: set %s=1 to run it, as CI does", what, EnvLong)
}
