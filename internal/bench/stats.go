package bench

import (
	"slices"
	"time"
)

// Latency statistics of `carmy bench`: exact, over every recorded call.

// latencyStats summarises a run's latencies.
type latencyStats struct {
	Mean, P50, P90, P99, P999, Max time.Duration
}

// mergeLatencies joins the clients' latency records into one slice.
func mergeLatencies(parts [][]time.Duration) []time.Duration {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	all := make([]time.Duration, 0, n)
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

// computeLatency returns the statistics of samples, which it sorts in
// place. No samples give zeros.
func computeLatency(samples []time.Duration) latencyStats {
	if len(samples) == 0 {
		return latencyStats{}
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, d := range samples {
		sum += d
	}
	return latencyStats{
		Mean: sum / time.Duration(len(samples)),
		P50:  percentile(samples, 500),
		P90:  percentile(samples, 900),
		P99:  percentile(samples, 990),
		P999: percentile(samples, 999),
		Max:  samples[len(samples)-1],
	}
}

// percentile returns the permille-th per mille of sorted (500 is the
// median, 999 is p99.9) by the nearest-rank method: the smallest sample
// that at least permille/1000 of the samples do not exceed. Integer
// arithmetic keeps it exact.
func percentile(sorted []time.Duration, permille int) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := (permille*n + 999) / 1000 // ceil(permille/1000 * n)
	rank = max(1, min(rank, n))
	return sorted[rank-1]
}
