package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaitResolvable checks the wait for a node's own host names: a name
// that resolves after a few tries is waited for, IPs are not looked up, a
// name that never resolves gives up after the bound with the lookup's
// error, and a cancelled context ends the wait.
func TestWaitResolvable(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	noSuchHost := errors.New("no such host")
	var calls atomic.Int32
	late := func(_ context.Context, host string) ([]string, error) {
		if host != "carmy-0.carmy-headless" {
			t.Errorf("looked up %q", host)
		}
		if calls.Add(1) < 3 {
			return nil, noSuchHost
		}
		return []string{"10.0.0.7"}, nil
	}
	if err := waitResolvable(t.Context(), quiet, late, time.Minute, "127.0.0.1:8080", "[::1]:8300", "carmy-0.carmy-headless:8301"); err != nil {
		t.Fatalf("a name that resolves on the third try: %v", err)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d lookups, want 3", calls.Load())
	}

	never := func(context.Context, string) ([]string, error) { return nil, noSuchHost }
	if err := waitResolvable(t.Context(), quiet, never, 300*time.Millisecond, "gone.example:8080"); !errors.Is(err, noSuchHost) {
		t.Fatalf("a name that never resolves: %v, want the lookup's error", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := waitResolvable(ctx, quiet, never, time.Minute, "gone.example:8080"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v, want context.Canceled", err)
	}
}
