package api

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// stepStart is the start of a step, well after the epoch.
var stepStart = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)

func TestActivitySeriesShape(t *testing.T) {
	clock := &fakeClock{t: stepStart.Add(2 * time.Second)}
	a := newActivity(clock.now)
	pts := a.series()
	if len(pts) != ActivitySteps {
		t.Fatalf("%d points, want %d", len(pts), ActivitySteps)
	}
	if last := pts[len(pts)-1].Time; !last.Equal(stepStart) {
		t.Fatalf("last point at %v, want the current step's start %v", last, stepStart)
	}
	for i := 1; i < len(pts); i++ {
		if d := pts[i].Time.Sub(pts[i-1].Time); d != ActivityStep {
			t.Fatalf("points %d and %d are %v apart, want %v", i-1, i, d, ActivityStep)
		}
		if pts[i] != (activityPoint{Time: pts[i].Time}) {
			t.Fatalf("point %d of an idle node = %+v, want zeros", i, pts[i])
		}
	}
}

func TestActivityOutcomeMapping(t *testing.T) {
	clock := &fakeClock{t: stepStart}
	a := newActivity(clock.now)
	for _, o := range []string{OutcomeRan, OutcomeRan, OutcomeReplayed, OutcomeConflict, OutcomeUncertain,
		OutcomeCapacity, OutcomeUnavailable, OutcomeInvalid, OutcomeDenied, OutcomeLimited, OutcomeError, "unknown"} {
		a.record(o)
	}
	clock.add(ActivityStep) // the step is complete: counts / 5 s
	got := a.series()[ActivitySteps-2]
	want := activityPoint{Time: stepStart, Fresh: 0.4, Replayed: 0.2, Conflict: 0.2, Uncertain: 0.2, Refused: 1.4}
	if got != want {
		t.Fatalf("point = %+v, want %+v", got, want)
	}
}

func TestActivityStepsRollOverAndAgeOut(t *testing.T) {
	clock := &fakeClock{t: stepStart}
	a := newActivity(clock.now)
	for range 10 {
		a.record(OutcomeRan)
	}
	clock.add(ActivityStep)
	for range 5 {
		a.record(OutcomeReplayed)
	}
	clock.add(ActivityStep)
	pts := a.series()
	if p := pts[ActivitySteps-3]; p.Time != stepStart || p.Fresh != 2 || p.Replayed != 0 {
		t.Fatalf("first step = %+v, want 2 fresh calls a second", p)
	}
	if p := pts[ActivitySteps-2]; p.Fresh != 0 || p.Replayed != 1 {
		t.Fatalf("second step = %+v, want 1 replayed call a second", p)
	}

	// 15 minutes after the first step began it is the oldest point; a
	// step later it is gone, and the slot it used counts the new step.
	clock.t = stepStart.Add(ActivitySteps*ActivityStep - ActivityStep)
	if p := a.series()[0]; p.Time != stepStart || p.Fresh != 2 {
		t.Fatalf("oldest point after 179 steps = %+v, want the first step", p)
	}
	clock.add(ActivityStep)
	a.record(OutcomeConflict)
	pts = a.series()
	if p := pts[0]; p.Time != stepStart.Add(ActivityStep) || p.Replayed != 1 {
		t.Fatalf("oldest point after 180 steps = %+v, want the second step", p)
	}
	for i, p := range pts[:ActivitySteps-1] {
		if p.Fresh != 0 {
			t.Fatalf("point %d = %+v: the first step's calls did not age out", i, p)
		}
	}
	if p := pts[ActivitySteps-1]; p.Conflict != 1 || p.Fresh != 0 {
		t.Fatalf("current step = %+v, want only the new conflict (its slot reused)", p)
	}

	// After a long idle time nothing is left.
	clock.add(time.Hour)
	for i, p := range a.series() {
		if p != (activityPoint{Time: p.Time}) {
			t.Fatalf("point %d an hour later = %+v, want zeros", i, p)
		}
	}
}

// TestActivityCurrentStep divides the current step by the time it has
// run, at least a second.
func TestActivityCurrentStep(t *testing.T) {
	clock := &fakeClock{t: stepStart.Add(2500 * time.Millisecond)}
	a := newActivity(clock.now)
	for range 5 {
		a.record(OutcomeRan)
	}
	if p := a.series()[ActivitySteps-1]; p.Fresh != 2 {
		t.Fatalf("5 calls in 2.5 s = %v a second, want 2", p.Fresh)
	}
	clock.t = stepStart.Add(5 * ActivityStep).Add(100 * time.Millisecond)
	for range 3 {
		a.record(OutcomeRan)
	}
	if p := a.series()[ActivitySteps-1]; p.Fresh != 3 {
		t.Fatalf("3 calls in the first 0.1 s = %v a second, want 3 (over at least a second)", p.Fresh)
	}
}

func TestActivityConcurrentRecords(t *testing.T) {
	clock := &fakeClock{t: stepStart}
	a := newActivity(clock.now)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				a.record(OutcomeRan)
			}
		})
	}
	wg.Wait()
	clock.add(ActivityStep)
	if p := a.series()[ActivitySteps-2]; p.Fresh != 1600 {
		t.Fatalf("8000 calls in a step = %v a second, want 1600", p.Fresh)
	}
}

func BenchmarkActivityRecord(b *testing.B) {
	a := newActivity(time.Now)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a.record(OutcomeRan)
		}
	})
}
