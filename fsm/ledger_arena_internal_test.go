package fsm

import (
	"bytes"
	"fmt"
	"testing"
)

// Values kept by a valueArena stay as they were given, however many more
// are kept after them, across blocks, and a value past a quarter of a
// block gets bytes of its own.
func TestValueArenaKeepsValues(t *testing.T) {
	var a valueArena
	var kept [][]byte
	var want [][]byte
	scratch := make([]byte, 0, arenaBlock)
	for i := range 2000 {
		v := fmt.Appendf(scratch[:0], "value %d %s", i, bytes.Repeat([]byte{'x'}, i%700))
		if i%500 == 499 {
			v = bytes.Repeat([]byte{byte(i)}, arenaBlock/2)
		}
		want = append(want, bytes.Clone(v))
		kept = append(kept, a.keep(v))
		scratch = v[:0] // the caller reuses its buffer
	}
	for i := range kept {
		if !bytes.Equal(kept[i], want[i]) {
			t.Fatalf("value %d changed after later values were kept", i)
		}
		if cap(kept[i]) != len(kept[i]) {
			t.Fatalf("value %d has room past its end (cap %d, len %d): an append would write over the next", i, cap(kept[i]), len(kept[i]))
		}
	}
}
