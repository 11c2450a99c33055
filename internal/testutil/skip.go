package testutil

import (
	"fmt"
	"os"
	"testing"
)

// SkipLoudly skips tb with the message, and also prints it to standard
// error, so that the skip shows in a `go test` run without -v (which
// prints a skipped test's log only with -v). Use it where a skip means
// that something a user may expect to run did not: a missing daemon, a
// busy port.
func SkipLoudly(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(os.Stderr, "--- SKIP: %s: %s\n", tb.Name(), msg)
	tb.Skip(msg)
}
