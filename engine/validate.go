package engine

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/carmyhq/carmy/internal/tracing"
	"github.com/carmyhq/carmy/store"
)

// This file holds the rules a call must meet, checked here and nowhere
// else: the API checks only that a request is well-formed JSON within its
// limits, and hands the values on; the store trusts what reaches it.

// pending is a call that passed validation.
type pending struct {
	caller  Caller
	req     Request
	tool    *tool
	args    json.RawMessage
	meta    json.RawMessage
	timeout time.Duration
	// down, when not nil, is the error of the tool's group while it is
	// unavailable (group.go): the call may be answered from a record the
	// store holds, and is refused with down wherever it would run the tool.
	down error
	// trace is the span of the call (tracing.Parent), the parent of the
	// spans of its tool's run and of the recording of its outcome, which
	// run under contexts of their own; nil while tracing is off.
	trace *tracing.Span
}

var emptyObject = json.RawMessage(`{}`)

// validate checks a request against its tool, before anything is reserved.
func (r *Runtime) validate(caller Caller, req Request) (*pending, error) {
	if caller.Principal == "" {
		return nil, invalid("principal", "empty principal")
	}
	if caller.MaxEntries < 0 || caller.MaxBytes < 0 {
		return nil, invalid("principal", "negative MaxEntries %d or MaxBytes %d", caller.MaxEntries, caller.MaxBytes)
	}
	if req.Tool == "" {
		return nil, invalid("tool", "required")
	}
	if !caller.MayCall(req.Tool) {
		// Before the lookup, so that a tool outside the caller's
		// allow-list is refused alike whether it exists or not.
		return nil, &ForbiddenError{Principal: caller.Principal, Tool: req.Tool}
	}
	t, down, err := r.lookup(req.Tool)
	if err != nil {
		return nil, err
	}
	if req.RequestID != "" {
		if err := checkRequestID(req.RequestID); err != nil {
			return nil, err
		}
		if strings.HasPrefix(req.RequestID, DerivedRequestPrefix) {
			return nil, invalid("request_id", "a request_id may not begin with %q: that prefix names the identities of a dedupe window", DerivedRequestPrefix)
		}
	}
	if err := checkSessionID(req.SessionID); err != nil {
		return nil, err
	}
	switch {
	case req.RequestID == "" && t.RequireRequestID:
		return nil, invalid("request_id", "tool %q requires a request_id", t.Name)
	case req.Timeout < 0:
		return nil, invalid("timeout_ms", "must be positive")
	}
	p := &pending{caller: caller, req: req, tool: t, args: req.Arguments, meta: req.Metadata, timeout: t.Timeout, down: down}
	if len(bytes.TrimSpace(p.args)) == 0 {
		p.args = emptyObject
	}
	if len(bytes.TrimSpace(p.meta)) == 0 {
		p.meta = emptyObject
	}
	if !isJSONObject(p.args) {
		return nil, invalid("arguments", "must be a JSON object")
	}
	if !isJSONObject(p.meta) {
		return nil, invalid("metadata", "must be a JSON object")
	}
	if err := t.checkArguments(p.args); err != nil {
		return nil, err
	}
	if req.Timeout > 0 && req.Timeout < p.timeout {
		p.timeout = req.Timeout
	}
	return p, nil
}

// checkRequestID refuses a request_id that is not 1-255 visible ASCII
// characters (docs/api.md#calling-a-tool-post-v1toolscall), whether it came in a body, an Idempotency-Key
// header or a lookup.
func checkRequestID(id string) error {
	if !store.ValidRequestID(id) {
		return invalid("request_id", "must be 1-%d visible ASCII characters (0x21-0x7E)", store.MaxIDLen)
	}
	return nil
}

// checkSessionID refuses a session_id that is not 0-255 visible ASCII
// characters (docs/api.md#calling-a-tool-post-v1toolscall).
func checkSessionID(id string) error {
	if !store.ValidSessionID(id) {
		return invalid("session_id", "must be 0-%d visible ASCII characters (0x21-0x7E)", store.MaxIDLen)
	}
	return nil
}

func isJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// validateResolution checks an outcome a caller established (docs/api.md#reconciling-cancel-and-resolve).
func validateResolution(res Resolution) error {
	switch res.Status {
	case string(store.StatusCompleted):
		if len(res.Error) > 0 {
			return invalid("error", "a completed resolution has no error")
		}
		if len(res.Data) == 0 {
			return invalid("data", "a completed resolution needs data")
		}
	case string(store.StatusFailed):
		if len(res.Data) > 0 {
			return invalid("data", "a failed resolution has no data")
		}
		var body store.ErrorBody
		if !isJSONObject(res.Error) || json.Unmarshal(res.Error, &body) != nil || body.Code == "" {
			return invalid("error", `a failed resolution needs an error object with a "code"`)
		}
	case ResolutionReleased:
		if len(res.Data) > 0 || len(res.Error) > 0 {
			return invalid("status", "a release carries no data or error")
		}
	default:
		return invalid("status", `must be "completed", "failed" or "released"`)
	}
	return nil
}
