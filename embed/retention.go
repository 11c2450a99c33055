package embed

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseRetention reads an age after which finished records (or audit
// entries) are removed: "off", "0" or "" keep them (0); else a Go
// duration (72h) or a whole number of days (30d). The error does not
// repeat s: the caller names where it came from (carmy serve's
// --retention, audit.retention).
func ParseRetention(s string) (time.Duration, error) {
	switch s {
	case "", "off", "0":
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		// Bounded so that n days fit in a time.Duration (no overflow).
		if n, err := strconv.Atoi(days); err == nil && n > 0 && int64(n) <= math.MaxInt64/int64(24*time.Hour) {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, errors.New("want off, a duration such as 72h, or days such as 30d")
	}
	return d, nil
}
