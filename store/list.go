package store

import (
	"cmp"
	"container/heap"
	"slices"
)

// List implements Store.List: the newest q.Limit records q selects
// (ListQuery.Match) with Seq below q.Before.
//
// Cost: it visits the candidate records by pointer, through the sessions
// index, without copying them: one session's records (principal and
// session given), every session of one principal's (AllSessions), one
// session of every principal's (AllPrincipals), or every record (both).
// It keeps the newest Limit+1 matches in a bounded heap, O(candidates ×
// log Limit), and copies only the page. The owner's read lock is held for
// the visit: for a State of 100k records, a listing of every record is
// a walk of 100k pointers, a few milliseconds (BenchmarkStateList100k),
// and a listing of one session costs in proportion to that session.
func (s *State) List(q ListQuery) Page {
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	top := newestHeap{cap: limit + 1}
	visit := func(recs map[string]*Record) {
		for _, r := range recs {
			if q.Match(r) {
				top.offer(r)
			}
		}
	}
	switch {
	case !q.AllSessions && !q.AllPrincipals:
		visit(s.sessions[sessionKey{q.Principal, q.Session}])
	case onlyUnfinished(q):
		visit(s.unfinished)
	case q.AllSessions && q.AllPrincipals:
		for _, recs := range s.sessions {
			visit(recs)
		}
	default: // one session of every principal, or every session of one
		for sk, recs := range s.sessions {
			if (q.AllSessions && sk.principal == q.Principal) || (q.AllPrincipals && sk.session == q.Session) {
				visit(recs)
			}
		}
	}
	found := top.recs
	slices.SortFunc(found, func(a, b *Record) int { return cmp.Compare(b.Seq, a.Seq) })
	var p Page
	if len(found) > limit {
		found = found[:limit]
		p.Next = found[limit-1].Seq
	}
	p.Records = make([]Record, len(found))
	for i, r := range found {
		p.Records[i] = *r
	}
	return p
}

// onlyUnfinished reports whether q matches unfinished records alone
// (attention, or only statuses not finished), so that List may look at
// those instead of every session's.
func onlyUnfinished(q ListQuery) bool {
	if q.Attention {
		return true
	}
	for _, st := range q.Statuses {
		if st.Finished() {
			return false
		}
	}
	return len(q.Statuses) > 0
}

// RunningNodes returns the distinct NodeIDs of the running records,
// sorted (RunningNodeLister). It visits every unfinished record.
func (s *State) RunningNodes() []string {
	var out []string
	for _, r := range s.unfinished {
		if r.Status == StatusRunning && !slices.Contains(out, r.NodeID) {
			out = append(out, r.NodeID)
		}
	}
	slices.Sort(out)
	return out
}

// newestHeap keeps the cap records of highest Seq offered to it: a
// min-heap on Seq, whose root is the oldest kept.
type newestHeap struct {
	cap  int
	recs []*Record
}

// offer keeps r if it is among the cap newest offered so far.
func (h *newestHeap) offer(r *Record) {
	if len(h.recs) < h.cap {
		heap.Push(h, r)
		return
	}
	if r.Seq > h.recs[0].Seq {
		h.recs[0] = r
		heap.Fix(h, 0)
	}
}

func (h *newestHeap) Len() int           { return len(h.recs) }
func (h *newestHeap) Less(i, j int) bool { return h.recs[i].Seq < h.recs[j].Seq }
func (h *newestHeap) Swap(i, j int)      { h.recs[i], h.recs[j] = h.recs[j], h.recs[i] }
func (h *newestHeap) Push(x any)         { h.recs = append(h.recs, x.(*Record)) }
func (h *newestHeap) Pop() any {
	r := h.recs[len(h.recs)-1]
	h.recs = h.recs[:len(h.recs)-1]
	return r
}
