package cluster

import (
	"testing"
	"time"
)

// A follower's silence is checked once it is longer than the heartbeat
// timeout plus the jitter (drawn in [0, timeout/2]), once per last
// contact, and never before any contact.
func TestSilenceWatchDue(t *testing.T) {
	hb := time.Second
	draws := []int64{int64(300 * time.Millisecond), int64(100 * time.Millisecond), 0}
	var bounds []int64
	w := newSilenceWatch(hb, func(n int64) int64 {
		bounds = append(bounds, n)
		d := draws[0]
		draws = draws[1:]
		return d
	})
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	if w.due(t0.Add(time.Hour), time.Time{}) {
		t.Error("due without any contact")
	}
	if w.due(t0.Add(1299*time.Millisecond), t0) {
		t.Error("due before the timeout and the jitter (1.3 s)")
	}
	if !w.due(t0.Add(1300*time.Millisecond), t0) {
		t.Error("not due at the timeout and the jitter")
	}
	if w.due(t0.Add(5*time.Second), t0) {
		t.Error("due twice for one last contact")
	}
	// The next silence uses the next jitter (100 ms).
	t1 := t0.Add(10 * time.Second)
	if w.due(t1.Add(1099*time.Millisecond), t1) || !w.due(t1.Add(1100*time.Millisecond), t1) {
		t.Error("the second silence was not due at 1.1 s exactly")
	}
	for _, n := range bounds {
		if n != int64(hb/2)+1 {
			t.Errorf("jitter drawn below %v, want below %v", time.Duration(n), hb/2+1)
		}
	}
}
