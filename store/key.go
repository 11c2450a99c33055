package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxIDLen is the longest request_id or session_id, in bytes.
const MaxIDLen = 255

// Key is the identity of a call: two calls with the same Key are the same
// call. Principal comes from authentication ("anonymous" when auth is off);
// Session and RequestID come from the caller.
type Key struct {
	Principal string `json:"principal"`
	Session   string `json:"session_id"`
	RequestID string `json:"request_id"`
}

// String renders the key for logs.
func (k Key) String() string {
	return fmt.Sprintf("%s/%s/%s", k.Principal, k.Session, k.RequestID)
}

// IdempotencyKey derives a stable key from the identity alone: the same for
// every execution of one identity, so an upstream that deduplicates on it
// still catches a re-run after the reservation was released.
func (k Key) IdempotencyKey() string {
	h := sha256.New()
	for _, part := range []string{k.Principal, k.Session, k.RequestID} {
		// Length-prefix every part so ("a","bc") and ("ab","c") differ.
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	return "carmy_" + hex.EncodeToString(h.Sum(nil))
}

// DerivedPrefix begins the request_id of an identity derived from a call
// without one under its tool's dedupe window (docs/mcp.md#calls-without-a-request-id-dedupe_window); a client's own
// request_id never begins with it.
const DerivedPrefix = "~"

// Derived reports whether k is a derived identity (its request_id begins
// with DerivedPrefix). Its finished record is not immutable: a reservation
// past its dedupe window replaces it (Execution.DedupeWindow), so a
// replicated store does not answer it from a replica's local state
// without a read barrier.
func (k Key) Derived() bool { return strings.HasPrefix(k.RequestID, DerivedPrefix) }

// ValidRequestID reports whether id is a valid request_id: 1 to MaxIDLen
// bytes, each a visible ASCII character (0x21 to 0x7E).
func ValidRequestID(id string) bool {
	return id != "" && validVisible(id)
}

// ValidSessionID reports whether id is a valid session_id: 0 to MaxIDLen
// bytes of visible ASCII.
func ValidSessionID(id string) bool {
	return validVisible(id)
}

func validVisible(s string) bool {
	if len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
