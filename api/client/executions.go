package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// GetExecution returns an execution's record (GET /v1/executions/{id}).
// An execution of another principal, or a call made without request_id,
// is ErrNotFound.
func (c *Client) GetExecution(ctx context.Context, executionID string) (*Execution, error) {
	path, err := executionPath(executionID, "")
	if err != nil {
		return nil, err
	}
	return c.execution(ctx, &request{method: http.MethodGet, path: path, idempotent: true})
}

// executionPath returns the path of an execution's record followed by
// suffix ("", "/cancel", "/resolve"), or a usage error for an empty id.
func executionPath(executionID, suffix string) (string, error) {
	if executionID == "" {
		return "", usage("empty execution id")
	}
	return "/v1/executions/" + url.PathEscape(executionID) + suffix, nil
}

// Lookup returns the caller's record of the identity (requestID, session)
// (GET /v1/executions?request_id=…&session_id=…), or ErrNotFound. It is
// how an agent learns what became of a call after EXECUTION_UNCERTAIN or
// a lost answer: its status, and its outcome once finished.
func (c *Client) Lookup(ctx context.Context, requestID, session string) (*Execution, error) {
	if requestID == "" {
		return nil, usage("empty request_id")
	}
	q := url.Values{"request_id": {requestID}}
	if session != "" {
		q.Set("session_id", session)
	}
	return c.execution(ctx, &request{method: http.MethodGet, path: "/v1/executions?" + q.Encode(), idempotent: true})
}

// ListOptions pages through a session's executions, and narrows the
// listing. The filters combine by AND; the node applies them before it
// cuts the page.
type ListOptions struct {
	// Limit is the most records in one page (0: the node's default).
	Limit int
	// Cursor is the NextCursor of the previous page ("" for the first).
	Cursor string
	// AllSessions lists every session the caller may see instead of one
	// (all_sessions=true); the session must then be "".
	AllSessions bool
	// Statuses keeps only records of these statuses (status=…).
	Statuses []Status
	// Tool keeps only records of this tool (tool=…).
	Tool string
	// Principal keeps only this principal's records (principal=…): the
	// admin's filter; any other token may name only its own principal,
	// another is ErrForbidden.
	Principal string
	// Attention keeps only the records that need a person (attention=true):
	// interrupted ones, and running ones whose node is gone.
	Attention bool
}

// ExecutionPage is one page of a session's executions, newest first.
type ExecutionPage struct {
	Executions []Execution
	// NextCursor is set while more records remain.
	NextCursor string
}

// ListExecutions returns the caller's executions in session (or, with
// opts.AllSessions, in every session), newest first, that opts select
// (GET /v1/executions?session_id=…): how an agent that restarted finds
// where it was.
func (c *Client) ListExecutions(ctx context.Context, session string, opts ListOptions) (*ExecutionPage, error) {
	if opts.Limit < 0 {
		return nil, usage("negative limit %d", opts.Limit)
	}
	q := url.Values{"session_id": {session}}
	if opts.AllSessions {
		if session != "" {
			return nil, usage("a session %q with AllSessions", session)
		}
		q = url.Values{"all_sessions": {"true"}}
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if len(opts.Statuses) > 0 {
		statuses := make([]string, len(opts.Statuses))
		for i, st := range opts.Statuses {
			statuses[i] = string(st)
		}
		q.Set("status", strings.Join(statuses, ","))
	}
	if opts.Tool != "" {
		q.Set("tool", opts.Tool)
	}
	if opts.Principal != "" {
		q.Set("principal", opts.Principal)
	}
	if opts.Attention {
		q.Set("attention", "true")
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	req := &request{method: http.MethodGet, path: "/v1/executions?" + q.Encode(), idempotent: true}
	var out listAnswer
	if _, err := c.do(ctx, req, &out); err != nil {
		return nil, err
	}
	page := &ExecutionPage{Executions: make([]Execution, 0, len(out.Executions)), NextCursor: out.NextCursor}
	for i := range out.Executions {
		page.Executions = append(page.Executions, *out.Executions[i].execution())
	}
	return page, nil
}

// listAnswer is the JSON of a session's listing.
type listAnswer struct {
	Executions []record `json:"executions"`
	NextCursor string   `json:"next_cursor"`
}

func (l *listAnswer) validate() error {
	for i := range l.Executions {
		if err := l.Executions[i].validate(); err != nil {
			return fmt.Errorf("executions[%d]: %w", i, err)
		}
	}
	return nil
}

// Cancel cancels a running execution (POST /v1/executions/{id}/cancel):
// cancelled is recorded at once and the tool's context is cancelled
// wherever it runs. It returns the record as it now stands. An execution
// that is not running is ErrInvalidState, with its status in
// APIError.ExecStatus.
//
// Cancel is retried like a read: the node applies it only to a running
// execution, so a retry of a cancel that took effect answers
// ErrInvalidState with ExecStatus cancelled rather than act twice.
func (c *Client) Cancel(ctx context.Context, executionID string) (*Execution, error) {
	path, err := executionPath(executionID, "/cancel")
	if err != nil {
		return nil, err
	}
	return c.execution(ctx, &request{method: http.MethodPost, path: path, body: []byte("{}"), idempotent: true})
}

// execution sends req and decodes a record.
func (c *Client) execution(ctx context.Context, req *request) (*Execution, error) {
	var rec record
	if _, err := c.do(ctx, req, &rec); err != nil {
		return nil, err
	}
	return rec.execution(), nil
}
