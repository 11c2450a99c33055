package mcp

import (
	"strconv"
	"testing"
	"time"
)

// TestInflightTable adds calls of one key and of another, removes them
// in every position of their list, and counts what cancelAll finds.
func TestInflightTable(t *testing.T) {
	h := &Handler{}
	k, other := inflightKey{sender{principal: "p", session: "s"}, "1"}, inflightKey{sender{principal: "p", session: "s"}, "2"}
	calls := make([]*inflightCall, 4)
	for i := range calls {
		calls[i] = &inflightCall{h: h, key: k}
		h.inflight.add(calls[i])
	}
	h.inflight.add(&inflightCall{h: h, key: other})
	count := func(k inflightKey) int {
		h.inflight.mu.Lock()
		defer h.inflight.mu.Unlock()
		n := 0
		for c := h.inflight.calls[k]; c != nil; c = c.next {
			n++
		}
		return n
	}
	if n := count(k); n != 4 {
		t.Fatalf("%d calls under the key, want 4", n)
	}
	for i, c := range []*inflightCall{calls[1], calls[3], calls[0], calls[2]} { // middle, newest, oldest, last
		c.done()
		if n := count(k); n != 3-i {
			t.Fatalf("after removing %d: %d calls, want %d", i+1, n, 3-i)
		}
	}
	if _, ok := h.inflight.calls[k]; ok {
		t.Error("an empty key is still in the table")
	}
	if n := h.inflight.cancelAll(other); n != 1 {
		t.Errorf("cancelAll of the other key: %d, want 1", n)
	}
}

// TestInflightDetached: a call whose client went away stays in the table
// until detachedFor has passed, and no more than maxDetached such calls
// are kept, the oldest leaving first.
func TestInflightDetached(t *testing.T) {
	h := &Handler{}
	at := time.Unix(1000, 0)
	first := &inflightCall{h: h, key: inflightKey{sender{principal: "p", session: "s"}, "first"}}
	h.inflight.add(first)
	h.inflight.detach(first, at)
	inTable := func(k inflightKey) bool {
		h.inflight.mu.Lock()
		defer h.inflight.mu.Unlock()
		_, ok := h.inflight.calls[k]
		return ok
	}
	if !inTable(first.key) {
		t.Fatal("a detached call left the table at once")
	}
	// Just before its time is up it is kept; at its time it goes.
	second := &inflightCall{h: h, key: inflightKey{sender{principal: "p", session: "s"}, "second"}}
	h.inflight.add(second)
	h.inflight.detach(second, at.Add(detachedFor-time.Millisecond))
	if !inTable(first.key) {
		t.Error("a detached call left the table before detachedFor")
	}
	third := &inflightCall{h: h, key: inflightKey{sender{principal: "p", session: "s"}, "third"}}
	h.inflight.add(third)
	h.inflight.detach(third, at.Add(detachedFor))
	if inTable(first.key) || !inTable(second.key) || !inTable(third.key) {
		t.Errorf("after detachedFor: first %v second %v third %v, want only the first gone",
			inTable(first.key), inTable(second.key), inTable(third.key))
	}
	// However many go away at once, at most maxDetached are kept.
	now := at.Add(detachedFor)
	for i := range 3 * maxDetached {
		c := &inflightCall{h: h, key: inflightKey{sender{principal: "p", session: "s"}, strconv.Itoa(i)}}
		h.inflight.add(c)
		h.inflight.detach(c, now)
	}
	h.inflight.mu.Lock()
	kept, detached := len(h.inflight.calls), len(h.inflight.detached)
	h.inflight.mu.Unlock()
	if kept != maxDetached || detached != maxDetached {
		t.Errorf("%d calls in the table, %d detached; want %d", kept, detached, maxDetached)
	}
	if inTable(second.key) || !inTable(inflightKey{sender{principal: "p", session: "s"}, strconv.Itoa(3*maxDetached - 1)}) {
		t.Error("the oldest detached calls were not the ones to leave")
	}
	// Their time up, they all leave.
	h.inflight.mu.Lock()
	h.inflight.expire(now.Add(detachedFor))
	kept = len(h.inflight.calls)
	h.inflight.mu.Unlock()
	if kept != 0 {
		t.Errorf("%d calls left once their time was up", kept)
	}
}
