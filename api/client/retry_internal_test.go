package client

import (
	"net/http"
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 10, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	for attempt, full := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 30: time.Second} {
		for range 200 {
			d := p.delay(attempt, 0)
			if d < full/2 || d > full {
				t.Fatalf("delay(%d) = %s, want within [%s, %s]", attempt, d, full/2, full)
			}
		}
	}
	if d := p.delay(1, 700*time.Millisecond); d < 700*time.Millisecond || d > time.Second {
		t.Fatalf("delay with Retry-After 700ms = %s, want at least that", d)
	}
	if d := p.delay(1, time.Minute); d != time.Second {
		t.Fatalf("delay with Retry-After 1m = %s, want MaxDelay", d)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"": 0, "0": 0, "-1": 0, "x": 0, "1": time.Second, " 3 ": 3 * time.Second,
		now.Add(2 * time.Second).Format(http.TimeFormat): 2 * time.Second,
		now.Add(-time.Hour).Format(http.TimeFormat):      0,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestDefaults(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 2}.withDefaults()
	if p.BaseDelay != DefaultRetryPolicy.BaseDelay || p.MaxDelay != DefaultRetryPolicy.MaxDelay || p.MaxAttempts != 2 {
		t.Fatalf("withDefaults = %+v", p)
	}
	if p := (RetryPolicy{BaseDelay: 10 * time.Second}).withDefaults(); p.MaxDelay != 10*time.Second {
		t.Fatalf("a BaseDelay above the default MaxDelay: %+v", p)
	}
}
