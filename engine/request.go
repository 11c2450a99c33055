package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/carmyhq/carmy/store"
)

// The rules both transports (POST /v1/tools/call and tools/call at /mcp)
// apply when they turn a call's members, as the transport read them, into
// a Request, and an error into what the caller is told, kept here once.

// RawCall is one call as its transport read it, before the rules below
// make it a Request: RequestOf applies them, for POST /v1/tools/call
// (package api) and tools/call at /mcp (package api/mcp) alike.
//
// Each optional member is given as encoding/json decodes a JSON value
// into an any (a string, a float64, a map[string]any, …), or by a
// transport that decodes into types of its own as a *string or as a
// *json.RawMessage holding its JSON text (valid JSON). Pointers, not
// values, so that the conversion to an any costs no allocation. nil, a
// nil pointer, empty text and JSON null are all absent.
type RawCall struct {
	// Tool is the tool's name ("" is refused).
	Tool string
	// Arguments is the arguments' JSON text (nil or null: none); the
	// runtime checks it is an object.
	Arguments json.RawMessage
	// RequestID and SessionID must be strings, RequestID not empty (an
	// empty one is refused, never read as absent); Metadata a JSON
	// object; TimeoutMS a positive integer (1000, 1e3 and 1000.0 alike),
	// capped at MaxTimeout.
	RequestID, SessionID, Metadata, TimeoutMS any
	// Names are the members' names as the transport spells them, for
	// the messages of its refusals (nil: HTTPNames).
	Names *MemberNames
}

// MemberNames are the names a transport gives a call's members. A refusal
// of RequestOf names the member by its field of docs/api.md#calling-a-tool-post-v1toolscall (request_id,
// session_id, metadata, timeout_ms, tool), and speaks of it by the
// transport's name.
type MemberNames struct {
	Tool, RequestID, SessionID, Metadata, TimeoutMS string
}

// HTTPNames are the members' names in POST /v1/tools/call's body, which
// are the fields' own.
var HTTPNames = MemberNames{Tool: "tool", RequestID: "request_id", SessionID: "session_id", Metadata: "metadata", TimeoutMS: "timeout_ms"}

// RequestOf checks w's members and returns the Request they make. Its
// errors are INVALID_REQUEST, a *store.FieldError naming the field at
// fault. The runtime checks the rest (Runtime.Call): the allow-list, the
// tool, the identifiers' characters, the arguments.
func RequestOf(w RawCall) (Request, error) {
	names := w.Names
	if names == nil {
		names = &HTTPNames
	}
	req := Request{Tool: w.Tool, Arguments: NullIsAbsent(w.Arguments)}
	if w.Tool == "" {
		return req, memberInvalid("tool", "%q is required", names.Tool)
	}
	if present(w.RequestID) {
		s, ok := memberString(w.RequestID)
		switch {
		case !ok:
			return req, memberInvalid("request_id", "%q must be a string", names.RequestID)
		case s == "":
			return req, memberInvalid("request_id", "%q must not be empty; omit it to call without idempotency", names.RequestID)
		}
		req.RequestID = s
	}
	if present(w.SessionID) {
		s, ok := memberString(w.SessionID)
		if !ok {
			return req, memberInvalid("session_id", "%q must be a string", names.SessionID)
		}
		req.SessionID = s
	}
	if present(w.Metadata) {
		raw, err := memberObject(w.Metadata)
		if err != nil {
			return req, memberInvalid("metadata", "%q %v", names.Metadata, err)
		}
		req.Metadata = raw
	}
	if present(w.TimeoutMS) {
		timeout, ok := memberTimeout(w.TimeoutMS)
		if !ok {
			return req, memberInvalid("timeout_ms", "%q must be a positive integer", names.TimeoutMS)
		}
		req.Timeout = timeout
	}
	return req, nil
}

// present reports whether a member of a RawCall is present.
func present(v any) bool {
	switch v := v.(type) {
	case *string:
		return v != nil
	case *json.RawMessage:
		return v != nil && NullIsAbsent(*v) != nil && len(bytes.TrimSpace(*v)) > 0
	}
	return v != nil
}

// memberInvalid is RequestOf's refusal of field.
func memberInvalid(field, format string, args ...any) error {
	return &store.FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// memberString returns v as a string: a decoded one, or the JSON text of
// one.
func memberString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case *string:
		return *v, true
	case *json.RawMessage:
		var s string
		return s, json.Unmarshal(*v, &s) == nil
	}
	return "", false
}

// errNotObject is the complaint about a metadata that is not an object.
var errNotObject = errors.New("must be a JSON object")

// memberObject returns the JSON text of v, which must be a JSON object.
func memberObject(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case map[string]any:
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("does not encode: %w", err)
		}
		return raw, nil
	case *json.RawMessage:
		if t := bytes.TrimSpace(*v); len(t) > 0 && t[0] == '{' {
			return *v, nil
		}
	}
	return nil, errNotObject
}

// memberTimeout returns the timeout of v, a number of milliseconds, by
// TimeoutOfMS.
func memberTimeout(v any) (time.Duration, bool) {
	var ms float64
	switch v := v.(type) {
	case float64:
		ms = v
	case *json.RawMessage:
		t := bytes.TrimSpace(*v)
		if len(t) == 0 || t[0] == '"' {
			return 0, false
		}
		f, err := json.Number(t).Float64()
		if err != nil {
			return 0, false
		}
		ms = f
	default:
		return 0, false
	}
	return TimeoutOfMS(ms)
}

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
