package main

import "testing"

// TestDevPortFollowsThePortBase: without -url the agent calls the dev node
// where CARMY_PORT_BASE puts it, as scripts/ports does.
func TestDevPortFollowsThePortBase(t *testing.T) {
	for base, want := range map[string]int{"": 8080, "7000": 8080, "20000": 21080} {
		if got, err := devPort(base); err != nil || got != want {
			t.Errorf("devPort(%q) = %d, %v; want %d", base, got, err, want)
		}
	}
	for _, bad := range []string{"x", "80", "70000"} {
		if _, err := devPort(bad); err == nil {
			t.Errorf("devPort(%q) = nil error, want one", bad)
		}
	}
}
