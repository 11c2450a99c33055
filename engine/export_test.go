package engine

import "time"

// SetClock replaces the runtime's clock, for tests of what depends on the
// times it stamps (the dedupe window).
func SetClock(r *Runtime, now func() time.Time) { r.now = now }
