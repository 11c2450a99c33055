package testutil

import (
	"flag"
	"testing"
)

// TestRaiseParallel: RaiseParallel sets -parallel when the command line
// did not give it, and leaves a given one alone.
func TestRaiseParallel(t *testing.T) {
	f := flag.Lookup("test.parallel")
	old := f.Value.String()
	t.Cleanup(func() { _ = f.Value.Set(old) })
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	RaiseParallel(5)
	want := "5"
	if given {
		want = old
	}
	if got := f.Value.String(); got != want {
		t.Fatalf("-parallel after RaiseParallel(5) = %s, want %s (given on the command line: %v)", got, want, given)
	}
}
