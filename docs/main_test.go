package docs

import (
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestMain builds carmy once for the package's tests, and lets TestDocs
// run all its walk-throughs at once: each waits on the nodes it started
// far more than it computes.
func TestMain(m *testing.M) { testutil.MainParallel(m, 6) }
