package store_test

import (
	"strings"
	"testing"

	"github.com/carmyhq/carmy/store"
)

func TestValidRequestID(t *testing.T) {
	cases := []struct {
		id   string
		want bool
	}{
		{"order-7f3", true},
		{"!", true},
		{"~" + strings.Repeat("a", 254), true},
		{strings.Repeat("a", 255), true},
		{strings.Repeat("a", 256), false},
		{"", false},
		{"has space", false},
		{"tab\t", false},
		{"nl\n", false},
		{"del\x7f", false},
		{"é", false},
		{"nul\x00", false},
	}
	for _, c := range cases {
		if got := store.ValidRequestID(c.id); got != c.want {
			t.Errorf("ValidRequestID(%q) = %v, want %v", c.id, got, c.want)
		}
	}
	if !store.ValidSessionID("") || store.ValidSessionID(strings.Repeat("s", 256)) {
		t.Error("ValidSessionID: empty must be valid and 256 bytes invalid")
	}
}

func TestIdempotencyKeyDependsOnIdentityOnly(t *testing.T) {
	a := store.Key{Principal: "p", Session: "s", RequestID: "r"}
	same := store.Key{Principal: "p", Session: "s", RequestID: "r"}
	if a.IdempotencyKey() != same.IdempotencyKey() || !strings.HasPrefix(a.IdempotencyKey(), "carmy_") {
		t.Fatalf("IdempotencyKey = %q", a.IdempotencyKey())
	}
	others := []store.Key{
		{Principal: "q", Session: "s", RequestID: "r"},
		{Principal: "p", Session: "t", RequestID: "r"},
		{Principal: "p", Session: "s", RequestID: "x"},
		{Principal: "ps", Session: "", RequestID: "r"},
	}
	for _, o := range others {
		if o.IdempotencyKey() == a.IdempotencyKey() {
			t.Errorf("%v and %v share an idempotency key", a, o)
		}
	}
}
