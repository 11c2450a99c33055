package client

import (
	"crypto/rand"
	"encoding/hex"
)

// RequestIDPrefix starts every request_id NewRequestID makes.
const RequestIDPrefix = "carmy-"

// maxIDLen bounds request_id and session_id (docs/api.md#calling-a-tool-post-v1toolscall).
const maxIDLen = 255

// NewRequestID returns a fresh request_id: RequestIDPrefix and 128 random
// bits in hex. An agent that must survive its own restart makes one with
// this, stores it with the step it belongs to, and passes it to every
// attempt of that step with RequestID.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return RequestIDPrefix + hex.EncodeToString(b[:])
}

// visibleASCII reports whether s is at most maxIDLen bytes, each a visible
// ASCII character (0x21–0x7E), as request_id and session_id must be.
func visibleASCII(s string) bool {
	if len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
