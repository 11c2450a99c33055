package otlp

import (
	"net/http"
	"testing"
	"time"
)

// TestRetryAfter: Retry-After in seconds or as an HTTP date; anything
// else is as if there were none.
func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 6, 7, 28, 0, 0, time.UTC)
	for _, c := range []struct {
		v     string
		after time.Duration
		given bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{" 3 ", 3 * time.Second, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	} {
		after, given := retryAfter(c.v, now)
		if after != c.after || given != c.given {
			t.Errorf("retryAfter(%q) = %s, %v; want %s, %v", c.v, after, given, c.after, c.given)
		}
	}
}
