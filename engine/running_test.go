package engine

import (
	"context"
	"errors"
	"testing"
)

// TestNoRegistrationAfterShutdownBegins pins the close of the running set:
// a call that passed the gate just before Shutdown began must not register
// a tool after the drain has counted none running.
func TestNoRegistrationAfterShutdownBegins(t *testing.T) {
	r := New()
	rn, why := r.runs.start("exec_before", Caller{Principal: "alice"}, 0, r.runLimits())
	ok := why == refusedNone
	if !ok || rn == nil {
		t.Fatal("registration before shutdown refused")
	}
	r.runs.finish("exec_before")
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	_, why = r.runs.start("exec_after", Caller{Principal: "alice"}, 0, r.runLimits())
	if why == refusedNone {
		t.Fatal("an execution registered after Shutdown had drained the running set")
	}
	if err := r.busy(why, Caller{Principal: "alice"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("the answer to a refused registration after shutdown: %v, want ErrClosed", err)
	}
	if n := r.Running(); n != 0 {
		t.Fatalf("Running() = %d after shutdown, want 0", n)
	}
}
