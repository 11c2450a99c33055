package bench

import (
	"testing"
	"time"
)

func TestStallTracker(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var s stallTracker
	s.start(at(0))
	for _, ms := range []int{5, 9, 12, 1400, 1401, 1399, 1410} { // 1399 arrives late
		s.success(at(ms))
	}
	longest, from, to := s.end(at(1500))
	if longest != 1388*time.Millisecond || !from.Equal(at(12)) || !to.Equal(at(1400)) {
		t.Fatalf("longest %v from %v to %v, want 1.388s from +12ms to +1400ms", longest, from.Sub(t0), to.Sub(t0))
	}

	// No answer at all: the whole run is the stall; an answer-less tail
	// counts too.
	s.start(at(0))
	if longest, _, _ := s.end(at(3000)); longest != 3*time.Second {
		t.Fatalf("a run without answers: longest %v, want 3s", longest)
	}
	s.start(at(0))
	s.success(at(10))
	if longest, from, _ := s.end(at(2010)); longest != 2*time.Second || !from.Equal(at(10)) {
		t.Fatalf("a silent tail: longest %v from %v, want 2s from +10ms", longest, from.Sub(t0))
	}
}
