package testutil

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
)

// MainParallel is Main for a package whose parallel tests mostly wait —
// on elections, on processes they started, on timers — rather than
// compute: up to n of its tests marked t.Parallel run at once
// (RaiseParallel). It does not return.
func MainParallel(m *testing.M, n int) {
	RaiseParallel(n)
	os.Exit(runMain(m))
}

// RaiseParallel, called from a TestMain before m.Run, lets up to n tests
// marked t.Parallel run at once, unless the command line gives -parallel;
// go test's default is GOMAXPROCS (two on a 2-core machine), which leaves
// most of the time of tests that wait idle. A test that measures, loads
// the machine or sets the environment does not call t.Parallel, and runs
// alone, before the parallel ones.
func RaiseParallel(n int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given {
		return
	}
	if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
		fmt.Fprintf(os.Stderr, "testutil.RaiseParallel: %v\n", err)
		os.Exit(2)
	}
}
