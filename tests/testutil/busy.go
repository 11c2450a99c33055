package testutil

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// BusyHost starts n processes that do nothing but spin on the CPU, beside
// the test's own (the nodes it starts, say), so that the test runs on a
// host whose cores are shared with other work. They stop when the test
// ends or after d, whichever comes first: each is killed by its pid.
func BusyHost(tb testing.TB, n int, d time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	var cmds []*exec.Cmd
	tb.Cleanup(func() {
		cancel() // CommandContext kills each process by its pid
		for _, c := range cmds {
			_ = c.Wait()
		}
	})
	for range n {
		c := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			tb.Fatalf("starting a busy process: %v", err)
		}
		cmds = append(cmds, c)
	}
}

// NeedBusyHost skips a test that makes the host busy (BusyHost) unless
// CARMY_BUSY_HOST is set: its spinning processes would slow every test of
// the other packages that `go test ./...` runs beside it. .ci/run runs
// such tests in a step of their own, alone on the machine.
func NeedBusyHost(tb testing.TB) {
	tb.Helper()
	if os.Getenv("CARMY_BUSY_HOST") == "" {
		tb.Skip("SKIPPED: it spins processes on the host's cores beside the nodes; set CARMY_BUSY_HOST=1 to run it " +
			"(.ci/run does, alone, after the rest: docs/testing.md)")
	}
}

// Runs is how many times a repeated scenario runs: the value of the
// environment variable name (docs/testing.md), or 1 when it is unset.
// A value that is not a positive integer fails the test.
func Runs(tb testing.TB, name string) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
