package postgres

import "testing"

// TestHeldShare checks that a Store reads first only while most recent
// reservations found their identity held, and turns within a few dozen
// answers when the mix changes.
func TestHeldShare(t *testing.T) {
	var h heldShare
	if h.readFirst() {
		t.Fatal("a new Store reads first; want it to go straight to the round")
	}
	turn := func(held bool) int {
		for i := 1; i <= 100; i++ {
			h.observe(held)
			if h.readFirst() == held {
				return i
			}
		}
		t.Fatalf("100 answers held=%v did not turn readFirst to %v", held, held)
		return 0
	}
	if n := turn(true); n < 2 || n > 40 {
		t.Fatalf("readFirst after %d held answers; want a few (2 to 40)", n)
	}
	for range 50 {
		h.observe(true)
	}
	if n := turn(false); n < 2 || n > 20 {
		t.Fatalf("straight to the round after %d new identities; want a few (2 to 20)", n)
	}
	// Half and half stays with the round: reads cost every new call.
	for i := range 200 {
		h.observe(i%2 == 0)
		if i > 100 && h.readFirst() {
			t.Fatalf("reads first with half the reservations held (answer %d); want the round", i)
		}
	}
}
