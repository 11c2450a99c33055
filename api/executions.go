package api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// listParams are the query parameters of a listing; a lookup by
// request_id takes none of them but session_id.
var listParams = []string{"limit", "cursor", "status", "tool", "principal", "all_sessions", "attention", "approvals"}

// findExecutions serves GET /v1/executions: a lookup by identity with
// request_id, else a listing (listRequest says of what).
func (s *Server) findExecutions(c echo.Context) error {
	q := c.Request().URL.Query()
	if err := onlyParams(q, append([]string{"request_id", "session_id"}, listParams...)...); err != nil {
		return err
	}
	caller := *callerOf(c)
	if q.Has("request_id") {
		for _, name := range listParams {
			if q.Has(name) {
				return invalidField("request_id", "a lookup by request_id takes no "+name)
			}
		}
		rec, err := s.rt.Lookup(c.Request().Context(), caller, q.Get("session_id"), q.Get("request_id"))
		if err != nil {
			return err
		}
		v := executionView(rec)
		return writeRecord(c, http.StatusOK, &v)
	}
	req, err := listRequest(q, caller)
	if err != nil {
		return err
	}
	page, err := s.rt.List(c.Request().Context(), caller, req)
	if err != nil {
		return err
	}
	out := listView{Executions: make([]recordView, 0, len(page.Records))}
	for _, r := range page.Records {
		out.Executions = append(out.Executions, executionView(r))
	}
	if page.Next != 0 {
		out.NextCursor = strconv.FormatUint(page.Next, 10)
	}
	return c.JSON(http.StatusOK, out)
}

// listRequest reads a listing's parameters. Without session_id an admin
// lists every session and another caller the session "" (docs/api.md#executions, docs/console.md);
// all_sessions=true lists every session for any caller, and names no
// session_id. status is one status or a comma-separated list of them
// (the runtime refuses one it does not know); tool and principal, when
// given, are not empty; all_sessions, attention and approvals are true or
// false. approvals=true (the console's approval queue) takes no
// session_id, all_sessions, principal, status or attention.
func listRequest(q url.Values, caller engine.Caller) (engine.ListRequest, error) {
	req := engine.ListRequest{Session: q.Get("session_id"), Tool: q.Get("tool"), Principal: q.Get("principal")}
	var err error
	if req.AllSessions, err = boolParam(q, "all_sessions"); err != nil {
		return req, err
	}
	if req.AllSessions && q.Has("session_id") {
		return req, invalidField("all_sessions", "all_sessions=true lists every session: give it without session_id")
	}
	if !q.Has("session_id") && caller.Admin {
		req.AllSessions = true
	}
	if req.Attention, err = boolParam(q, "attention"); err != nil {
		return req, err
	}
	if req.Approvals, err = boolParam(q, "approvals"); err != nil {
		return req, err
	}
	if req.Approvals {
		// Every session's executions awaiting approval that the caller
		// may see or decide on: the selections that would narrow it
		// otherwise are refused rather than ignored.
		for _, name := range []string{"session_id", "all_sessions", "principal", "status", "attention"} {
			if q.Has(name) {
				return req, invalidField("approvals", "approvals=true lists every session's executions awaiting approval: give it without "+name)
			}
		}
	}
	for _, name := range []string{"tool", "principal", "status"} {
		if q.Has(name) && q.Get(name) == "" {
			return req, invalidField(name, name+" must not be empty: leave it out to list every "+name)
		}
	}
	if q.Has("status") {
		for st := range strings.SplitSeq(q.Get("status"), ",") {
			req.Statuses = append(req.Statuses, store.Status(st))
		}
	}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > store.MaxListLimit {
			return req, invalidField("limit", "limit must be an integer from 1 to "+strconv.Itoa(store.MaxListLimit))
		}
		req.Limit = n
	}
	if q.Has("cursor") {
		n, err := strconv.ParseUint(q.Get("cursor"), 10, 64)
		if err != nil || n == 0 {
			return req, invalidField("cursor", "cursor must be the next_cursor of an earlier page")
		}
		req.Before = n
	}
	return req, nil
}

// boolParam reads the query parameter name: absent is false, otherwise
// it must be "true" or "false".
func boolParam(q url.Values, name string) (bool, error) {
	if !q.Has(name) {
		return false, nil
	}
	switch q.Get(name) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, invalidField(name, name+" must be true or false")
}
