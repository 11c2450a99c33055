package api

import (
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// The outcomes of GET /v1/activity, in the order of its "outcomes": the
// call outcomes of carmy_calls_total folded into what an operator tells
// apart. Everything refused before or instead of a run (capacity,
// unavailable, invalid, denied, rate_limited, error) is refused.
const (
	ActivityFresh     = "fresh"
	ActivityReplayed  = "replayed"
	ActivityConflict  = "conflict"
	ActivityUncertain = "uncertain"
	ActivityRefused   = "refused"
)

// activityOutcomes are the outcomes of the answer, by index.
var activityOutcomes = [...]string{ActivityFresh, ActivityReplayed, ActivityConflict, ActivityUncertain, ActivityRefused}

// The ring of GET /v1/activity: ActivitySteps steps of ActivityStep, the
// last 15 minutes.
const (
	ActivityStep  = 5 * time.Second
	ActivitySteps = 180
)

// activityIndex maps a call outcome (OutcomeRan, …) to its index in
// activityOutcomes.
func activityIndex(outcome string) int {
	switch outcome {
	case OutcomeRan, OutcomePassthrough:
		return 0
	case OutcomeReplayed:
		return 1
	case OutcomeConflict:
		return 2
	case OutcomeUncertain:
		return 3
	}
	return 4
}

// activity counts the tool calls this node answered (over HTTP and MCP
// alike) per step of ActivityStep, by outcome, over the last
// ActivitySteps steps: a fixed ring, whose slot for a step is reused
// ActivitySteps steps later. It is safe for concurrent use; record, on
// every call, takes a mutex for a few instructions and allocates nothing.
type activity struct {
	now func() time.Time

	mu    sync.Mutex
	slots [ActivitySteps]activitySlot
}

// activitySlot counts the calls of one step; step is the step's number
// (Unix time / ActivityStep), so a slot left from an earlier turn of the
// ring reads as empty.
type activitySlot struct {
	step   int64
	counts [len(activityOutcomes)]uint64
}

func newActivity(now func() time.Time) *activity {
	a := &activity{now: now}
	for i := range a.slots {
		a.slots[i].step = math.MinInt64 // no step: every slot starts empty
	}
	return a
}

// stepOf returns the number of t's step.
func stepOf(t time.Time) int64 { return t.UnixNano() / int64(ActivityStep) }

// slot returns the slot that counts step.
func (a *activity) slot(step int64) *activitySlot {
	i := step % ActivitySteps
	if i < 0 {
		i += ActivitySteps
	}
	return &a.slots[i]
}

// record counts one answered call of the given outcome (OutcomeRan, …)
// in the current step.
func (a *activity) record(outcome string) {
	step := stepOf(a.now())
	i := activityIndex(outcome)
	a.mu.Lock()
	slot := a.slot(step)
	if slot.step != step {
		*slot = activitySlot{step: step}
	}
	slot.counts[i]++
	a.mu.Unlock()
}

// activityPoint is one step of the answer: its start and the calls per
// second of each outcome over it.
type activityPoint struct {
	Time      time.Time `json:"time"`
	Fresh     float64   `json:"fresh"`
	Replayed  float64   `json:"replayed"`
	Conflict  float64   `json:"conflict"`
	Uncertain float64   `json:"uncertain"`
	Refused   float64   `json:"refused"`
}

// activityView is the answer of GET /v1/activity.
type activityView struct {
	NodeID        string          `json:"node_id"`
	StepSeconds   int             `json:"step_seconds"`
	WindowSeconds int             `json:"window_seconds"`
	Outcomes      []string        `json:"outcomes"`
	Points        []activityPoint `json:"points"`
}

// series returns the ActivitySteps points of the last 15 minutes, oldest
// first, every step present (zeros where none was counted); the last is
// the current step, so far. A full step's counts are divided by its
// length; the current step's by the time it has run, at least a second
// (so that its first calls do not read as a burst).
func (a *activity) series() []activityPoint {
	now := a.now()
	cur := stepOf(now)
	var counts [ActivitySteps][len(activityOutcomes)]uint64
	a.mu.Lock()
	for k := range ActivitySteps {
		step := cur - int64(ActivitySteps-1-k)
		if slot := a.slot(step); slot.step == step {
			counts[k] = slot.counts
		}
	}
	a.mu.Unlock()
	out := make([]activityPoint, ActivitySteps)
	elapsed := now.Sub(time.Unix(0, cur*int64(ActivityStep)))
	for k := range out {
		step := cur - int64(ActivitySteps-1-k)
		secs := ActivityStep.Seconds()
		if k == ActivitySteps-1 {
			secs = max(elapsed.Seconds(), 1)
		}
		rate := func(i int) float64 { return math.Round(float64(counts[k][i])/secs*1000) / 1000 }
		out[k] = activityPoint{
			Time:  time.Unix(0, step*int64(ActivityStep)).UTC(),
			Fresh: rate(0), Replayed: rate(1), Conflict: rate(2), Uncertain: rate(3), Refused: rate(4),
		}
	}
	return out
}

// getActivity serves GET /v1/activity: this node's calls per second by
// outcome over the last 15 minutes (admin token when auth is on).
func (s *Server) getActivity(c echo.Context) error {
	if err := onlyParams(c.Request().URL.Query()); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, activityView{
		NodeID:        s.nodeID,
		StepSeconds:   int(ActivityStep / time.Second),
		WindowSeconds: int(ActivitySteps * ActivityStep / time.Second),
		Outcomes:      activityOutcomes[:],
		Points:        s.activity.series(),
	})
}
