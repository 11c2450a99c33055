package cluster

import (
	"testing"

	"github.com/carmyhq/carmy/fsm"
)

// TestEntryLen: a round goes into one entry up to fsm.MaxBatchCommands
// commands and maxEntryBytes together; a command over maxEntryBytes goes
// alone.
func TestEntryLen(t *testing.T) {
	of := func(sizes ...int) []*proposal {
		q := make([]*proposal, len(sizes))
		for i, n := range sizes {
			q[i] = &proposal{data: make([]byte, n)}
		}
		return q
	}
	many := make([]int, fsm.MaxBatchCommands+10)
	for i := range many {
		many[i] = 100
	}
	cases := []struct {
		name string
		q    []*proposal
		want int
	}{
		{"one", of(10), 1},
		{"a round of small commands", of(300, 300, 300, 300), 4},
		{"over the count", of(many...), fsm.MaxBatchCommands},
		{"a large command alone", of(maxEntryBytes+1, 10), 1},
		{"up to the byte bound", of(maxEntryBytes/2, maxEntryBytes/2, 1), 2},
		{"exactly the bound", of(maxEntryBytes), 1},
	}
	for _, c := range cases {
		if got := entryLen(c.q); got != c.want {
			t.Errorf("%s: entryLen = %d, want %d", c.name, got, c.want)
		}
	}
}
