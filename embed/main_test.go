package embed_test

import (
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestMain lets the tests that start nodes (each its own, on 127.0.0.1:0,
// in its own directories) run four at a time: they wait on elections and
// timers far more than they compute.
func TestMain(m *testing.M) { testutil.MainParallel(m, 4) }
