package postgres

import "sync/atomic"

// A reservation is answered either way: a round's statement answers a
// held identity from its record and reserves a vacant one (rounds_set.go),
// and so does a read of the identity (Lookup) followed, when it is vacant,
// by the round. What differs is the cost. Straight into the round, a new
// call costs its share of the round's statements and nothing else; a read
// first costs every new call a statement and a round trip more (measured
// with carmy bench on three nodes: docs/performance.md). But a node runs
// one round at a time, while reads run side by side on the pool's
// connections: a replay that waits for a round waits for the round before
// it, and replays alone went from 2,463 a second with a read first to 355
// through the rounds. So a Store reads first only while most reservations
// lately found their identity held (more than three in four: heldShare),
// and goes straight to the round otherwise. Either path gives the same answers; only the cost is
// chosen.

// heldScale is heldShare's fixed point: heldScale means every recent
// reservation found its identity held.
const heldScale = 1 << 10

// heldShare is an exponentially weighted share of the recent reservations
// of a Store that found their identity held (replay, conflict, uncertain),
// in 1/heldScale; each answer moves it by 1/16 of the distance to 0 or to
// heldScale. Concurrent updates may lose one another's step: it is an
// estimate, and never decides an answer.
type heldShare struct{ v atomic.Int64 }

// observe records whether a reservation found its identity held.
func (h *heldShare) observe(held bool) {
	v := h.v.Load()
	if held {
		v += (heldScale - v) / 16
	} else {
		v -= v / 16
	}
	h.v.Store(v)
}

// readFirst says whether the next reservation should read its identity
// before it joins a round: while more than three in four recent ones were
// held (a mix of new calls and retries stays with the round).
func (h *heldShare) readFirst() bool { return h.v.Load() > heldScale*3/4 }
