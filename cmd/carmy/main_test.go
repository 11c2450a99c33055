package main

import (
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestMain builds cmd/carmy once for the package's tests
// (testutil.BuildCarmy) and removes that build when they end. The
// parallel tests mostly wait on the processes they start, so up to 4 run
// at once (testutil.MainParallel), unless -parallel says otherwise.
func TestMain(m *testing.M) { testutil.MainParallel(m, 4) }
