package main

import (
	"math"
	"slices"
	"time"
)

// latencyStats are percentiles of a run's latencies, by the nearest-rank
// method, as carmy bench computes them.
type latencyStats struct{ P50, P90, P99, P999 time.Duration }

// computeLatency sorts samples in place and returns their percentiles;
// no samples give zeros.
func computeLatency(samples []time.Duration) latencyStats {
	slices.Sort(samples)
	return latencyStats{
		P50:  percentile(samples, 500),
		P90:  percentile(samples, 900),
		P99:  percentile(samples, 990),
		P999: percentile(samples, 999),
	}
}

// percentile returns the permille-th per mille of sorted: the smallest
// sample that at least permille/1000 of the samples do not exceed.
func percentile(sorted []time.Duration, permille int) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := max(1, min((permille*n+999)/1000, n))
	return sorted[rank-1]
}

// round rounds x to places decimals.
func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

// median returns the median of xs (the mean of the middle two for an even
// count), sorting xs in place; 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
