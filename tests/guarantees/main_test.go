package guarantees_test

import (
	"os"
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestMain builds carmy once for the matrix. With the one-node column
// alone (the README's test command) four routes run at a time: their cells
// wait on the node's timers and upstreams. With the long tier's back ends
// of several nodes, or the full matrix, go test's default (the number of
// cores): there the runner-killed cells hold the world alone for seconds
// each, and four at a time gained nothing.
func TestMain(m *testing.M) {
	if os.Getenv(testutil.EnvLong) != "1" && !full() {
		testutil.RaiseParallel(4)
	}
	testutil.Main(m)
}
