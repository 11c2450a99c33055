package cluster

import (
	"slices"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster/peer"
)

// A follower's silence is acted on once it reaches the threshold, once
// per last contact, and never before any contact.
func TestSilenceWatchDue(t *testing.T) {
	w := &silenceWatch{threshold: 1250 * time.Millisecond}
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	if w.due(t0.Add(time.Hour), time.Time{}) {
		t.Error("due without any contact")
	}
	if w.due(t0.Add(1249*time.Millisecond), t0) {
		t.Error("due before the threshold")
	}
	if !w.due(t0.Add(1250*time.Millisecond), t0) {
		t.Error("not due at the threshold")
	}
	if w.due(t0.Add(5*time.Second), t0) {
		t.Error("due twice for one last contact")
	}
	t1 := t0.Add(10 * time.Second)
	if w.due(t1.Add(time.Second), t1) || !w.due(t1.Add(2*time.Second), t1) {
		t.Error("a later silence was not due at its own threshold")
	}
}

// Voters are checked from the shortest log to the longest: a later term
// beats any index, then the index, then the id; the longest goes last.
func TestVotersCheckedShortestLogFirst(t *testing.T) {
	voters := []silenceVoter{
		{id: "a", pos: peer.LogPosition{LastTerm: 3, LastIndex: 10}},
		{id: "b", pos: peer.LogPosition{LastTerm: 2, LastIndex: 99}},
		{id: "c", pos: peer.LogPosition{LastTerm: 3, LastIndex: 12}},
		{id: "d", pos: peer.LogPosition{LastTerm: 3, LastIndex: 10}},
		{id: "e", pos: peer.LogPosition{LastTerm: 3, LastIndex: 11}},
	}
	orderVoters(voters)
	var ids []string
	for _, v := range voters {
		ids = append(ids, v.id)
	}
	if want := []string{"b", "a", "d", "e", "c"}; !slices.Equal(ids, want) {
		t.Errorf("order %v, want %v", ids, want)
	}
}
