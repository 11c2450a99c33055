package guarantees_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// cellsAtOnce is how many cells run side by side unless -test.parallel
// is given: a cell mostly waits (on its nodes, its upstream, a tool that
// sleeps, a node's restart), so two at a time, the default on two cores,
// left the machine half idle.
const cellsAtOnce = "4"

func TestMain(m *testing.M) {
	flag.Parse()
	if !parallelGiven(os.Args[1:]) {
		if err := flag.Set("test.parallel", cellsAtOnce); err != nil {
			panic(err)
		}
	}
	testutil.Main(m)
}

// parallelGiven reports whether args set -test.parallel (or -parallel).
func parallelGiven(args []string) bool {
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		if a == "test.parallel" || a == "parallel" || strings.HasPrefix(a, "test.parallel=") || strings.HasPrefix(a, "parallel=") {
			return true
		}
	}
	return false
}
