package engine

import "time"

// SetClock replaces the runtime's clock, for tests of what depends on the
// times it stamps (the dedupe window).
func SetClock(r *Runtime, now func() time.Time) { r.now = now }

// PendingNotifications is how many approval notifications r holds (being
// sent or waiting to be tried again).
func PendingNotifications(r *Runtime) int { return len(r.notes.slots) }
