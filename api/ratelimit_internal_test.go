package api

import (
	"fmt"
	"testing"
)

// TestLimitersDropFullBuckets checks that the buckets of many principals
// (an OAuth issuer names any number) do not pile up: full ones, which a
// new bucket equals, are dropped, and a drained one is kept.
func TestLimitersDropFullBuckets(t *testing.T) {
	l := newLimiters(RateLimit{PerSecond: 0.001, Burst: 1})
	if !l.of("busy").Allow() {
		t.Fatal("a new bucket refused its first request")
	}
	for i := range 10 * minSweepAt {
		l.of(fmt.Sprintf("p%d", i))
	}
	l.mu.Lock()
	n := len(l.by)
	_, kept := l.by["busy"]
	l.mu.Unlock()
	if n > minSweepAt+1 || !kept {
		t.Errorf("after %d principals: %d buckets (want at most %d), the drained one kept: %v", 10*minSweepAt, n, minSweepAt+1, kept)
	}
	if l.of("busy").Allow() {
		t.Error("the drained bucket was replaced by a full one")
	}
}
