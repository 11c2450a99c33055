package mcp

import "testing"

// TestInflightTable adds calls of one key and of another, removes them
// in every position of their list, and counts what cancelAll finds.
func TestInflightTable(t *testing.T) {
	h := &Handler{}
	k, other := inflightKey{"p", "s", "1"}, inflightKey{"p", "s", "2"}
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
