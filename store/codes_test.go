package store_test

import (
	"errors"
	"testing"

	"github.com/carmyhq/carmy/store"
)

// Every code a store returns names one sentinel, which carries that code;
// the API's own codes name none.
func TestSentinelCarriesItsCode(t *testing.T) {
	stores := map[store.Code]error{
		store.CodeInvalidRequest: store.ErrInvalid,
		store.CodeNotFound:       store.ErrNotFound,
		store.CodeConflict:       store.ErrConflict,
		store.CodeUncertain:      store.ErrUncertain,
		store.CodeInvalidState:   store.ErrInvalidState,
		store.CodeCapacity:       store.ErrCapacity,
		store.CodeUnavailable:    store.ErrUnavailable,
	}
	for _, code := range store.Codes {
		s := store.Sentinel(code)
		want, ok := stores[code]
		switch {
		case !ok && s != nil:
			t.Errorf("Sentinel(%s) = %v, want nil (no store returns it)", code, s)
		case ok && s != want:
			t.Errorf("Sentinel(%s) = %v, want %v", code, s, want)
		case ok && s.ErrorCode() != code:
			t.Errorf("Sentinel(%s) carries %s", code, s.ErrorCode())
		}
	}
	if store.Sentinel("FROM_THE_FUTURE") != nil {
		t.Error("an unknown code names a sentinel")
	}
}

// ErrCommitUnknown is no code's sentinel: "sent, outcome unknown" is not
// an outcome, and must never be rebuilt from UNAVAILABLE.
func TestCommitUnknownIsNoSentinel(t *testing.T) {
	for _, code := range store.Codes {
		if errors.Is(store.Sentinel(code), store.ErrCommitUnknown) {
			t.Errorf("Sentinel(%s) matches ErrCommitUnknown", code)
		}
	}
}

func TestWithMessage(t *testing.T) {
	err := store.ErrNotFound.WithMessage(`no member "n9"`)
	if !errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid) {
		t.Fatalf("%v: matches the wrong sentinels", err)
	}
	if err.Error() != `no member "n9"` || store.CodeOf(err) != store.CodeNotFound {
		t.Fatalf("message %q, code %q", err.Error(), store.CodeOf(err))
	}
}
