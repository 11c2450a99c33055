package engine_test

import (
	"os"
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestMain lets the tests marked t.Parallel (the probes' and
// notifications' retries, the layout checks running `go list`) run four at
// a time: they wait on timers and the go command.
func TestMain(m *testing.M) {
	testutil.RaiseParallel(4)
	os.Exit(m.Run())
}
