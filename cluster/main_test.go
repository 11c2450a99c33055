package cluster_test

import (
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestMain builds cmd/carmy once for the package's tests
// (testutil.BuildCarmy) and removes that build when they end.
func TestMain(m *testing.M) { testutil.MainParallel(m, 4) }
