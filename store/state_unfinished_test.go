package store

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestStateUnfinishedIndex drives a State through random reservations
// (some behind an approval gate), completions, interruptions as a
// runner's answer, cancellations, resolutions, releases, decisions,
// markings of a node, expiries, replacements (past a dedupe window, or
// of an uncertain record retried) and restores. After every step it
// checks that each execution id leads to its record, that the unfinished
// index holds exactly the held records not finished, and that every
// query answered from it (List of unfinished statuses or attention,
// RunningNodes, Interrupted, MarkInterruptedRecords) answers what a visit
// of every record answers.
func TestStateUnfinishedIndex(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	rapid.Check(t, func(rt *rapid.T) {
		s := NewState(rapid.IntRange(3, 40).Draw(rt, "capacity"))
		seq, ids := uint64(0), 0
		nodes := []string{"n1", "n2", "n3"}
		key := func(rt *rapid.T) Key {
			return Key{
				Principal: rapid.SampledFrom([]string{"alice", "bob"}).Draw(rt, "principal"),
				Session:   rapid.SampledFrom([]string{"s1", "s2"}).Draw(rt, "session"),
				RequestID: rapid.SampledFrom([]string{"r1", "r2", "r3", "r4", "r5"}).Draw(rt, "request"),
			}
		}
		// held picks a held record's execution id (or an unknown one).
		held := func(rt *rapid.T) string {
			recs := s.Records()
			if len(recs) == 0 || rapid.IntRange(0, 9).Draw(rt, "unknown") == 0 {
				return "e-none"
			}
			return rapid.SampledFrom(recs).Draw(rt, "record").ExecutionID
		}
		at := func(rt *rapid.T) time.Time {
			return t0.Add(time.Duration(rapid.IntRange(0, 100).Draw(rt, "minute")) * time.Minute)
		}
		for step := range rapid.IntRange(1, 80).Draw(rt, "steps") {
			switch op := rapid.IntRange(0, 10).Draw(rt, "op"); op {
			case 0, 1, 2: // reserve, sometimes gated, sometimes past a window
				ids++
				seq++
				exec := Execution{ID: fmt.Sprintf("e%d", ids), Tool: "t", NodeID: rapid.SampledFrom(nodes).Draw(rt, "node"), StartedAt: at(rt)}
				if rapid.Bool().Draw(rt, "gated") {
					exec.Approval = &ApprovalGate{ExpiresAt: at(rt)}
				}
				if rapid.Bool().Draw(rt, "windowed") {
					exec.DedupeWindow = 10 * time.Minute
				}
				exec.RetryUncertain = rapid.Bool().Draw(rt, "retryUncertain")
				_, _ = s.Reserve(key(rt), rapid.SampledFrom([]string{"fa", "fb"}).Draw(rt, "fp"), exec, seq)
			case 3: // complete, or the runner's own word that its answer was lost
				recs := s.Records()
				if len(recs) == 0 {
					continue
				}
				r := rapid.SampledFrom(recs).Draw(rt, "record")
				res := Result{ExecutionID: r.ExecutionID, Status: StatusCompleted, Data: json.RawMessage(`{"ok":true}`), FinishedAt: at(rt)}
				if rapid.Bool().Draw(rt, "lost") {
					res = Result{ExecutionID: r.ExecutionID, Status: StatusInterrupted}
				}
				_, _ = s.Complete(r.Key, r.Fingerprint, res)
			case 4:
				id := held(rt)
				_, _ = s.Cancel(id, Result{ExecutionID: id, Status: StatusCancelled, Error: json.RawMessage(`{"code":"CANCELLED"}`), FinishedAt: at(rt)})
			case 5:
				id := held(rt)
				_, _ = s.Resolve(id, Resolution{Result: Result{ExecutionID: id, Status: StatusFailed, Error: json.RawMessage(`{"code":"X"}`), FinishedAt: at(rt)},
					AllowRunning: rapid.Bool().Draw(rt, "allowRunning"), By: "op"})
			case 6:
				_, _ = s.Release(held(rt), rapid.Bool().Draw(rt, "allowRunning"))
			case 7:
				seq++
				d := Decision{Kind: rapid.SampledFrom([]DecisionKind{DecisionApprove, DecisionDeny, DecisionExpire}).Draw(rt, "decision"),
					Actor: "admin", NodeID: rapid.SampledFrom(nodes).Draw(rt, "node"), At: at(rt)}
				_, _ = s.Decide(held(rt), d, seq)
			case 8:
				got := s.MarkInterruptedRecords(rapid.SampledFrom(nodes).Draw(rt, "node"))
				if !slices.IsSortedFunc(got, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) }) {
					rt.Fatalf("step %d: MarkInterruptedRecords not in Seq order", step)
				}
			case 9:
				s.Expire(at(rt))
			case 10:
				r := NewState(s.Capacity())
				if err := r.Restore(s.Records(), s.LastSeq()); err != nil {
					rt.Fatalf("step %d: restore: %v", step, err)
				}
				s = r
			}
			checkUnfinished(rt, s, step)
		}
	})
}

// checkUnfinished compares everything answered from s.unfinished with a
// visit of every record.
func checkUnfinished(rt *rapid.T, s *State, step int) {
	want := 0
	interrupted := 0
	var running []string
	if len(s.byID) != len(s.byKey) {
		rt.Fatalf("step %d: %d execution ids for %d records", step, len(s.byID), len(s.byKey))
	}
	for _, r := range s.byKey {
		if s.byID[r.ExecutionID] != r {
			rt.Fatalf("step %d: execution id %s does not lead to its record", step, r.ExecutionID)
		}
		got, in := s.unfinished[r.ExecutionID]
		switch {
		case r.Status.Finished() && in:
			rt.Fatalf("step %d: finished %s (%s) is indexed as unfinished", step, r.ExecutionID, r.Status)
		case !r.Status.Finished() && got != r:
			rt.Fatalf("step %d: unfinished %s (%s) is not indexed (or not by pointer)", step, r.ExecutionID, r.Status)
		}
		if !r.Status.Finished() {
			want++
		}
		if r.Status == StatusInterrupted {
			interrupted++
		}
		if r.Status == StatusRunning && !slices.Contains(running, r.NodeID) {
			running = append(running, r.NodeID)
		}
	}
	if len(s.unfinished) != want {
		rt.Fatalf("step %d: %d records indexed as unfinished, %d held", step, len(s.unfinished), want)
	}
	if n := s.Interrupted(); n != interrupted {
		rt.Fatalf("step %d: Interrupted() = %d, want %d", step, n, interrupted)
	}
	slices.Sort(running)
	if got := s.RunningNodes(); !slices.Equal(got, running) {
		rt.Fatalf("step %d: RunningNodes() = %v, want %v", step, got, running)
	}
	all := s.Records()
	queries := []ListQuery{
		{AllPrincipals: true, AllSessions: true, Statuses: []Status{StatusAwaitingApproval}, Limit: 3},
		{AllPrincipals: true, AllSessions: true, Statuses: []Status{StatusRunning, StatusInterrupted}},
		{Principal: "alice", AllSessions: true, Statuses: []Status{StatusRunning}},
		{AllPrincipals: true, Session: "s2", Statuses: []Status{StatusInterrupted}},
		{Principal: "bob", Session: "s1", Statuses: []Status{StatusAwaitingApproval, StatusRunning}},
		{AllPrincipals: true, AllSessions: true, Attention: true, GoneNodes: []string{"n2"}},
		{AllPrincipals: true, AllSessions: true, Attention: true, Statuses: []Status{StatusRunning}, GoneNodes: []string{"n1", "n3"}, Limit: 2},
	}
	for _, q := range queries {
		for page, before := 0, uint64(0); ; page++ {
			q.Before = before
			got := s.List(q)
			limit := cmp.Or(q.Limit, DefaultListLimit)
			var match []Record
			for i := range all {
				if q.Match(&all[i]) {
					match = append(match, all[i])
				}
			}
			slices.SortFunc(match, func(a, b Record) int { return cmp.Compare(b.Seq, a.Seq) })
			next := uint64(0)
			if len(match) > limit {
				match = match[:limit]
				next = match[limit-1].Seq
			}
			if !slices.EqualFunc(got.Records, match, recordsEqual) || got.Next != next {
				rt.Fatalf("step %d: List(%+v) page %d = %d records (next %d), want %d (next %d)", step, q, page, len(got.Records), got.Next, len(match), next)
			}
			if next == 0 {
				break
			}
			before = next
		}
	}
}
