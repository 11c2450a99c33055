package main

import (
	"strings"
	"testing"
	"time"
)

// TestPrintTablePairsAndMedians: runs are paired by mode, callers and pair
// number whatever their order, each pair gets Carmy's calls/s over etcd's,
// and each group a median of the ratios (not a ratio of the medians).
func TestPrintTablePairsAndMedians(t *testing.T) {
	rs := []result{
		{System: "etcd", Mode: "new", Clients: 64, Pair: 1, CallsPerS: 1000},
		{System: "carmy", Mode: "new", Clients: 64, Pair: 1, CallsPerS: 3000},
		{System: "etcd", Mode: "new", Clients: 64, Pair: 2, CallsPerS: 2000},
		{System: "carmy", Mode: "new", Clients: 64, Pair: 2, CallsPerS: 2000},
		{System: "carmy", Mode: "new", Clients: 64, Pair: 3, CallsPerS: 5000},
		{System: "etcd", Mode: "new", Clients: 64, Pair: 3, CallsPerS: 2500},
		{System: "etcd", Mode: "replay", Clients: 64, Pair: 1, CallsPerS: 100},
	}
	var b strings.Builder
	if err := printTable(&b, rs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 7 {
		t.Fatalf("want a header, 4 lines for mode new and 2 for replay, got %d:\n%s", len(lines), b.String())
	}
	for i, want := range []string{"3.00", "1.00", "2.00"} {
		if f := strings.Fields(lines[1+i]); f[len(f)-1] != want {
			t.Errorf("pair %d: ratio %q, want %s:\n%s", i+1, f[len(f)-1], want, b.String())
		}
	}
	// Ratios 3, 1, 2: median 2. The medians of the rates are 2000 and 3000
	// (ratio 1.5), which the line must not print.
	f := strings.Fields(lines[4])
	if f[2] != "median" || f[3] != "2000.0" || f[4] != "3000.0" || f[5] != "2.00" {
		t.Errorf("median line %q, want etcd 2000.0, carmy 3000.0, ratio 2.00", lines[4])
	}
	if f := strings.Fields(lines[5]); f[len(f)-1] != "—" {
		t.Errorf("a pair without Carmy's half has no ratio: %q", lines[5])
	}
}

// TestPercentileNearestRank: p50 of 1..10 ms is 5 ms, p99 10 ms, as carmy
// bench's.
func TestPercentileNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 10; i >= 1; i-- {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	st := computeLatency(s)
	if st.P50 != 5*time.Millisecond || st.P99 != 10*time.Millisecond || st.P90 != 9*time.Millisecond {
		t.Errorf("got %+v", st)
	}
}
