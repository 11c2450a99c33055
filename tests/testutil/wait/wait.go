// Package wait is the one polling loop of the tests: a test that waits
// for a condition polls it with a deadline, never sleeps and hopes. It
// imports the standard library only, so that any package's internal tests
// can use it (tests/testutil, which builds whole nodes, forwards to
// it as testutil.WaitFor and testutil.WaitUntil).
//
// It is a test harness, not a supported API: only tests (_test.go files)
// import it, and it changes with them.
package wait

import (
	"errors"
	"testing"
	"time"
)

// Interval is how often a condition is polled.
const Interval = 20 * time.Millisecond

// For polls cond every Interval until it returns nil, and fails the test
// with cond's last error when timeout passes first.
func For(tb testing.TB, timeout time.Duration, what string, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(Interval)
	}
}

// Until is For for a condition that holds or not, with nothing to say
// about why not.
func Until(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	For(tb, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// errNotYet is Until's condition not holding yet.
var errNotYet = errors.New("the condition does not hold")
