package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"
)

// maxAnswer bounds the body of one answer the client reads.
const maxAnswer = 64 << 20

// request is one logical request, sent once or more.
type request struct {
	method string
	// path is everything after the base URL: escaped path and query.
	path string
	// body is the JSON body; nil sends none.
	body []byte
	// idempotent is true when sending the request again cannot act twice
	// (a read, a call with request_id, a state-guarded cancel or resolve),
	// so an attempt with an unknown fate may be retried.
	idempotent bool
	// call is true for POST /v1/tools/call: EXECUTION_UNCERTAIN of a
	// running execution is then worth another attempt.
	call bool
	// retry is the policy of this request; the zero value means the
	// client's.
	retry RetryPolicy
	// tool, requestID and sessionID name a call's identity in errors.
	tool, requestID, sessionID string
}

// do sends req until it succeeds, fails for good, runs out of attempts or
// ctx ends, and decodes a 2xx answer's JSON into out (unless out is nil).
// Every error is a *RequestError.
func (c *Client) do(ctx context.Context, req *request, out any) (http.Header, error) {
	if req.retry == (RetryPolicy{}) {
		req.retry = c.retry
	}
	p := req.retry
	var last error
	for attempt := 1; ; attempt++ {
		h, err := c.once(ctx, req, out)
		if err == nil {
			return h, nil
		}
		if ctx.Err() != nil {
			// An attempt the context cut short says less than an
			// earlier answer (EXECUTION_UNCERTAIN, UNAVAILABLE, …).
			if last == nil || !isTransport(err) {
				last = err
			}
			return nil, req.fail(attempt, last, ctx.Err())
		}
		last = err
		again, after := retryable(err, req)
		if !again || attempt >= p.MaxAttempts {
			return nil, req.fail(attempt, last, nil)
		}
		wait := p.delay(attempt, after)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
			return nil, req.fail(attempt, last, context.DeadlineExceeded)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, req.fail(attempt, last, ctx.Err())
		case <-t.C:
		}
	}
}

func (req *request) fail(attempts int, err, stopped error) error {
	return &RequestError{
		Op: req.method + " " + req.path, Tool: req.tool, RequestID: req.requestID, SessionID: req.sessionID,
		Attempts: attempts, Err: err, Stopped: stopped,
	}
}

// once sends req one time and decodes the answer.
func (c *Client) once(ctx context.Context, req *request, out any) (http.Header, error) {
	if req.retry.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.retry.AttemptTimeout)
		defer cancel()
	}
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, c.base+req.path, body)
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	hr.Header.Set("Accept", "application/json")
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.ua != "" {
		hr.Header.Set("User-Agent", c.ua)
	}
	resp, err := c.hc.Do(hr)
	if err != nil {
		return nil, &transportError{err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, &transportError{fmt.Errorf("reading the answer (HTTP %d): %w", resp.StatusCode, err)}
	}
	return resp.Header, decodeAnswer(resp, raw, out)
}

// validator is an answer that checks itself once decoded.
type validator interface{ validate() error }

// decodeAnswer turns an answer into out, an *APIError or a
// *ProtocolError.
func decodeAnswer(resp *http.Response, raw []byte, out any) error {
	retryAfter := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	protocol := func(err error) error {
		return &ProtocolError{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"),
			Snippet: snippet(raw), RetryAfter: retryAfter, Err: err, Body: raw[:min(len(raw), maxAnswer)]}
	}
	if len(raw) > maxAnswer {
		return protocol(fmt.Errorf("the body is over %d bytes", maxAnswer))
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out == nil {
			return nil
		}
		if rb, ok := out.(*rawBody); ok {
			*rb = raw
			return nil
		}
		if err := json.Unmarshal(raw, out); err != nil {
			return protocol(err)
		}
		if v, ok := out.(validator); ok {
			if err := v.validate(); err != nil {
				return protocol(err)
			}
		}
		return nil
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "" && mt != "application/json" {
		return protocol(nil)
	}
	var env struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &env) != nil || env.Error == nil {
		return protocol(nil)
	}
	code := stringField(env.Error, "code")
	if code == "" {
		return protocol(nil)
	}
	return &APIError{
		Status:      resp.StatusCode,
		Code:        code,
		Message:     stringField(env.Error, "message"),
		ExecutionID: stringField(env.Error, "execution_id"),
		ExecStatus:  Status(stringField(env.Error, "status")),
		Principal:   stringField(env.Error, "principal"),
		Field:       stringField(env.Error, "field"),
		ToolRan:     boolField(env.Error, "tool_ran"),
		RetryAfter:  retryAfter,
		Fields:      env.Error,
		Body:        raw,
	}
}

// stringField returns a string member of an object, "" when absent or not
// a string.
func stringField(obj map[string]json.RawMessage, name string) string {
	var s string
	if raw, ok := obj[name]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// boolField returns a boolean member of an object, nil when absent or not
// a boolean.
func boolField(obj map[string]json.RawMessage, name string) *bool {
	var b bool
	if raw, ok := obj[name]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) && json.Unmarshal(raw, &b) == nil {
		return &b
	}
	return nil
}

// snippet returns the start of a body as valid UTF-8.
func snippet(raw []byte) string {
	const n = 200
	if len(raw) > n {
		raw = raw[:n]
	}
	return string(bytes.ToValidUTF8(raw, nil))
}
