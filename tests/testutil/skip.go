package testutil

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// SkipLoudly skips tb with the message and also prints it, as
// "--- SKIP: <test>: <message>", where a `go test` run shows it without
// -v (Loud). Use it where a skip means that something a user may expect to
// run did not: a missing daemon, a busy port.
func SkipLoudly(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(Loud(), "--- SKIP: %s: %s\n", tb.Name(), msg)
	tb.Skip(msg)
}

var loud struct {
	once sync.Once
	w    io.Writer
}

// Loud returns where a line must be written for a `go test` run to show it
// without -v. The go command shows none of a passing package's output —
// its standard error included — unless -v is given, so a line printed to
// os.Stderr by a skipped test is lost; when this test binary runs under
// the go command (its parent process is `go`, on Linux), Loud is that
// command's own standard error, which the user's terminal or the CI log
// shows at once. Elsewhere it is os.Stderr.
func Loud() io.Writer {
	loud.once.Do(func() {
		loud.w = os.Stderr
		ppid := os.Getppid()
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "go" {
			return
		}
		if f, err := os.OpenFile("/proc/"+strconv.Itoa(ppid)+"/fd/2", os.O_WRONLY|os.O_APPEND, 0); err == nil {
			loud.w = f
		}
	})
	return loud.w
}
