package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

func TestTimeoutOfMS(t *testing.T) {
	for _, c := range []struct {
		ms   float64
		want time.Duration
		ok   bool
	}{
		{1, time.Millisecond, true},
		{1500, 1500 * time.Millisecond, true},
		{86_399_999, 86_399_999 * time.Millisecond, true},
		{86_400_000, MaxTimeout, true},
		{1e300, MaxTimeout, true},
		{0, 0, false},
		{-5, 0, false},
		{1.5, 0, false},
	} {
		got, ok := TimeoutOfMS(c.ms)
		if got != c.want || ok != c.ok {
			t.Errorf("TimeoutOfMS(%v) = %v, %v; want %v, %v", c.ms, got, ok, c.want, c.ok)
		}
	}
}

func TestNullIsAbsent(t *testing.T) {
	for raw, want := range map[string]string{"null": "", " null\n": "", `{"a":null}`: `{"a":null}`, `"null"`: `"null"`} {
		if got := NullIsAbsent(json.RawMessage(raw)); string(got) != want || (want == "" && got != nil) {
			t.Errorf("NullIsAbsent(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestRequestEnded(t *testing.T) {
	for _, err := range []error{context.Canceled, fmt.Errorf("call: %w", context.DeadlineExceeded)} {
		got, ok := RequestEnded(err)
		if !ok || store.CodeOf(got) != store.CodeUnavailable || got.Error() != "the request ended before an answer: "+err.Error() {
			t.Errorf("RequestEnded(%v) = %v, %v", err, got, ok)
		}
	}
	other := errors.New("disk on fire")
	if got, ok := RequestEnded(other); ok || got != other {
		t.Errorf("RequestEnded(other) = %v, %v", got, ok)
	}
}
