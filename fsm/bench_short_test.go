package fsm_test

import "os"

// benchRecords returns n, or a twentieth of it (at least 100) when
// CARMY_BENCH_SHORT=1: the memory and sizing benchmarks measure per record
// over many records, which proves nothing more when CI runs each once to
// keep it from rotting (.ci/run sets it there).
func benchRecords(n int) int {
	if os.Getenv("CARMY_BENCH_SHORT") == "1" {
		return max(n/20, 100)
	}
	return n
}
