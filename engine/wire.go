package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/carmyhq/carmy/store"
)

// The rules both transports (POST /v1/tools/call and tools/call at /mcp)
// apply when they turn a call's wire members into a Request, and an
// error into what the caller is told, kept here once.

// MaxTimeout caps a call's timeout_ms (carmy/timeout_ms over MCP) before
// it becomes a Duration; the tool's own timeout caps it further.
const MaxTimeout = 24 * time.Hour

// TimeoutOfMS returns the timeout of ms milliseconds, capped at
// MaxTimeout, and whether ms is a positive integer (else the call is
// refused).
func TimeoutOfMS(ms float64) (time.Duration, bool) {
	if ms < 1 || ms != math.Trunc(ms) {
		return 0, false
	}
	if ms >= float64(MaxTimeout/time.Millisecond) {
		return MaxTimeout, true
	}
	return time.Duration(ms) * time.Millisecond, true
}

// NullIsAbsent treats a JSON null like an absent member: it returns nil
// for null, else raw.
func NullIsAbsent(raw json.RawMessage) json.RawMessage {
	if string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	return raw
}

// RequestEnded returns the UNAVAILABLE refusal of a call whose request
// ended (its context was cancelled or timed out) before an answer, and
// true; for any other error it returns err and false. Nobody may be
// listening then, and the tool, if it started, runs on and is recorded.
func RequestEnded(err error) (error, bool) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return store.NewError(store.CodeUnavailable, "the request ended before an answer: "+err.Error()), true
	}
	return err, false
}
