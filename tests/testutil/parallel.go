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
// compute: unless the command line gives -parallel, up to n of its tests
// marked t.Parallel run at once instead of GOMAXPROCS (go test's
// default, two on a 2-core machine, which leaves most of such a
// package's time idle). A test that measures, loads the machine or sets
// the environment does not call t.Parallel, and runs alone, before the
// parallel ones. It does not return.
func MainParallel(m *testing.M, n int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			fmt.Fprintf(os.Stderr, "testutil.MainParallel: %v\n", err)
			os.Exit(2)
		}
	}
	os.Exit(runMain(m))
}
