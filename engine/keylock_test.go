package engine

import (
	"context"
	"errors"
	"testing"
)

// TestKeyLocks: one holder per key at a time, other keys free; a waiter
// whose context ends holds nothing; the table forgets a key once no one
// holds or waits for it.
func TestKeyLocks(t *testing.T) {
	var k keyLocks
	unlock, err := k.lock(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := k.lock(t.Context(), "b")
	if err != nil {
		t.Fatalf("another key: %v", err)
	}
	unlockB()

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := k.lock(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a held key, the waiter's context ended: %v", err)
	}
	got := make(chan func(), 1)
	go func() {
		u, err := k.lock(t.Context(), "a")
		if err != nil {
			t.Error(err)
		}
		got <- u
	}()
	select {
	case <-got:
		t.Fatal("a second holder of a held key")
	default:
	}
	unlock()
	(<-got)()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.m) != 0 {
		t.Fatalf("the table keeps %d keys no one holds", len(k.m))
	}
}
