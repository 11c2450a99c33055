package wait

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, as testing's does.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a recorder in a goroutine of its own and returns what
// Fatalf said ("" when it was not called).
func run(f func(tb testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.msg
}

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	msg := run(func(tb testing.TB) {
		For(tb, time.Minute, "the third call", func() error {
			if calls++; calls < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	})
	if msg != "" || calls != 3 {
		t.Fatalf("Fatalf(%q) after %d calls, want no failure after 3", msg, calls)
	}
}

func TestForFailsWithTheLastError(t *testing.T) {
	calls := 0
	msg := run(func(tb testing.TB) {
		For(tb, 0, "never", func() error {
			calls++
			return fmt.Errorf("attempt %d", calls)
		})
	})
	if !strings.Contains(msg, "waiting for never") || !strings.HasSuffix(msg, fmt.Sprintf("attempt %d", calls)) {
		t.Fatalf("Fatalf(%q), want the condition named and its last error", msg)
	}
}

func TestUntil(t *testing.T) {
	if msg := run(func(tb testing.TB) { Until(tb, 0, "false", func() bool { return false }) }); !strings.Contains(msg, "waiting for false") {
		t.Errorf("Until of a false condition: Fatalf(%q)", msg)
	}
	if msg := run(func(tb testing.TB) { Until(tb, 0, "true", func() bool { return true }) }); msg != "" {
		t.Errorf("Until of a true condition: Fatalf(%q)", msg)
	}
}
