package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// CallOption sets a member of a call.
type CallOption func(*callSettings)

type callSettings struct {
	requestID   string
	requestSet  bool
	noRequestID bool
	session     string
	metadata    any
	timeout     time.Duration
	timeoutSet  bool
	retry       *RetryPolicy
}

// RequestID names the call: with the principal and the session it is the
// call's identity, so that the tool runs at most once for it however often
// the call is sent. Give the same id to every attempt of one logical step,
// across restarts of the agent too (see NewRequestID). 1–255 visible ASCII
// characters.
func RequestID(id string) CallOption {
	return func(s *callSettings) { s.requestID, s.requestSet = id, true }
}

// NoRequestID sends the call without request_id: the tool runs without
// idempotency and nothing is recorded. Such a call is retried only when it
// certainly did not reach the tool (a refused connection, UNAVAILABLE,
// RATE_LIMITED), never after a reset or a timeout.
func NoRequestID() CallOption { return func(s *callSettings) { s.noRequestID = true } }

// Session sets session_id (0–255 visible ASCII characters; "" by default).
func Session(id string) CallOption { return func(s *callSettings) { s.session = id } }

// Metadata sets metadata: a JSON object (a map[string]any, a struct, a
// json.RawMessage or []byte of JSON). It is part of the fingerprint, so a
// retry must send the same.
func Metadata(v any) CallOption { return func(s *callSettings) { s.metadata = v } }

// Timeout sets timeout_ms, which may lower the tool's configured timeout
// (rounded up to a whole millisecond; it must be positive). It is not part
// of the fingerprint.
func Timeout(d time.Duration) CallOption {
	return func(s *callSettings) { s.timeout, s.timeoutSet = d, true }
}

// Retry sets the retry policy of this call, instead of the client's (zero
// fields take DefaultRetryPolicy's values).
func Retry(p RetryPolicy) CallOption { return func(s *callSettings) { s.retry = &p } }

// callBody is the JSON of POST /v1/tools/call (docs/api.md#calling-a-tool-post-v1toolscall).
type callBody struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
	SessionID string          `json:"session_id,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	TimeoutMS int64           `json:"timeout_ms,omitempty"`
}

// Call calls tool with args (POST /v1/tools/call) and returns its outcome.
//
// args is the arguments object: a json.RawMessage or []byte of JSON, or
// any value json.Marshal turns into an object; nil means {}. A string is
// marshalled as a JSON string, which is not an object: pass JSON text as
// json.RawMessage. Arguments that are not an object are refused before
// anything is sent (ErrInvalid).
//
// Identity. Unless RequestID gives one (or NoRequestID asks for none),
// Call generates a request_id with NewRequestID, so that its own retries
// are safe: every attempt carries the same request_id, so the tool runs at
// most once whatever the network did. The id is in Result.RequestID and,
// on failure, in the *RequestError. A generated id protects only this
// Call's retries: to make a step safe across restarts of the agent, choose
// the id yourself and keep it.
//
// Outcomes. A call that the node answered with an outcome returns a
// Result, whatever its status: completed, or failed, timed_out or
// cancelled (Result.Err turns those into an error). A replay of a recorded
// outcome has Replayed set. Everything else is an error, a *RequestError
// wrapping the last attempt's error:
//   - an *APIError (errors.Is with ErrConflict, ErrUncertain, …);
//   - a *ProtocolError for an answer that is not Carmy's (a proxy's page);
//   - a transport error, or the context's error.
//
// Retries (within the policy's attempts and the context's deadline, with
// backoff that honours Retry-After): transport errors, UNAVAILABLE,
// RATE_LIMITED, a proxy's 502/503/504, and EXECUTION_UNCERTAIN while the
// execution is running (another attempt of the same identity is running:
// wait for its outcome, which is then replayed). Every other answer is
// final (RetryPolicy lists them), among them IDEMPOTENCY_CONFLICT and
// EXECUTION_UNCERTAIN of an interrupted execution: its runner died, so
// only someone who can check the tool's effects can settle it (Lookup,
// GetExecution, Resolve); errors.Is(err, ErrInterrupted) tells it.
func (c *Client) Call(ctx context.Context, tool string, args any, opts ...CallOption) (*Result, error) {
	var s callSettings
	for _, opt := range opts {
		opt(&s)
	}
	body, err := s.body(tool, args)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("carmy: encoding the call: %w", err)
	}
	req := &request{
		method: http.MethodPost, path: "/v1/tools/call", body: raw,
		idempotent: body.RequestID != "", call: true,
		tool: tool, requestID: body.RequestID, sessionID: body.SessionID,
	}
	if s.retry != nil {
		req.retry = *s.retry
	}
	var ans callAnswer
	h, err := c.do(ctx, req, &ans)
	if err != nil {
		return nil, err
	}
	res := ans.result()
	res.Replayed = res.Replayed || strings.EqualFold(h.Get("Idempotent-Replayed"), "true")
	res.Raw, res.Header = ans.raw, h
	return res, nil
}

// callAnswer is a call's answer: the record, and the body as it came.
type callAnswer struct {
	record
	raw json.RawMessage
}

// UnmarshalJSON decodes the record and keeps a copy of the body.
func (a *callAnswer) UnmarshalJSON(b []byte) error {
	a.raw = append(json.RawMessage(nil), b...)
	return json.Unmarshal(b, &a.record)
}

// body checks the settings, fills the zero fields of a Retry policy, and
// builds the call's JSON.
func (s *callSettings) body(tool string, args any) (*callBody, error) {
	if tool == "" {
		return nil, usage("the tool name is empty")
	}
	if s.retry != nil {
		p, err := s.retry.normalized()
		if err != nil {
			return nil, usage("retry policy: %v", err)
		}
		s.retry = &p
	}
	b := &callBody{Tool: tool, SessionID: s.session}
	var err error
	if b.Arguments, err = encodeObject("arguments", args); err != nil {
		return nil, err
	}
	if b.Metadata, err = encodeObject("metadata", s.metadata); err != nil {
		return nil, err
	}
	switch {
	case s.noRequestID && s.requestSet:
		return nil, usage("both RequestID and NoRequestID")
	case s.noRequestID:
	case s.requestSet:
		if s.requestID == "" || !visibleASCII(s.requestID) {
			return nil, usage("request_id %q: want 1-255 visible ASCII characters", s.requestID)
		}
		b.RequestID = s.requestID
	default:
		b.RequestID = NewRequestID()
	}
	if !visibleASCII(s.session) {
		return nil, usage("session_id %q: want 0-255 visible ASCII characters", s.session)
	}
	if s.timeoutSet {
		if s.timeout <= 0 {
			return nil, usage("timeout %s: want a positive duration", s.timeout)
		}
		b.TimeoutMS = int64((s.timeout + time.Millisecond - 1) / time.Millisecond)
	}
	return b, nil
}
