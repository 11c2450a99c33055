package bench

import (
	"sync"
	"time"
)

// stallTracker finds the longest stretch of a run without a successful
// answer: from the start of the measurement, or a successful answer, to
// the next one, or to the end. Under steady load it is a few
// milliseconds; while a cluster has no leader (after kill -9 of the
// leader, say) it is how long writes stopped, as a client saw it.
type stallTracker struct {
	mu       sync.Mutex
	last     time.Time // the start, or the last successful answer
	longest  time.Duration
	from, to time.Time // the longest stretch
}

// start begins tracking at t.
func (s *stallTracker) start(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last, s.longest, s.from, s.to = t, 0, time.Time{}, time.Time{}
}

// success notes a successful answer at t.
func (s *stallTracker) success(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.note(t)
	if t.After(s.last) {
		s.last = t
	}
}

// end closes the run at t and returns the longest stretch and when it
// was.
func (s *stallTracker) end(t time.Time) (longest time.Duration, from, to time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.note(t)
	return s.longest, s.from, s.to
}

func (s *stallTracker) note(t time.Time) {
	if s.last.IsZero() {
		return
	}
	if gap := t.Sub(s.last); gap > s.longest {
		s.longest, s.from, s.to = gap, s.last, t
	}
}
