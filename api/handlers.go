package api

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/store"
)

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	if err := s.rt.Ready(c.Request().Context()); err != nil {
		return &Error{Code: store.CodeUnavailable, Message: "not ready", Err: err}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) callTool(c echo.Context) error {
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	idemKey, err := idempotencyKey(c.Request().Header)
	if err != nil {
		return err
	}
	req, err := decodeCall(body, idemKey)
	if err != nil {
		return err
	}
	line := callLineOf(c)
	line.tool, line.requestID, line.session = req.Tool, req.RequestID, req.SessionID
	resp, err := s.rt.Call(c.Request().Context(), *callerOf(c), req)
	if err != nil {
		return err
	}
	line.executionID, line.status = resp.Record.ExecutionID, string(resp.Record.Status)
	if req.RequestID == "" {
		line.requestID = resp.Record.Key.RequestID // derived under a dedupe window, or ""
	}
	if resp.Replayed {
		c.Response().Header().Set("Idempotent-Replayed", "true")
		c.Set(outcomeKey, OutcomeReplayed)
	} else {
		c.Set(outcomeKey, OutcomeRan)
	}
	v := callView(resp)
	return writeRecord(c, http.StatusOK, &v)
}

// listTools serves GET /v1/tools: the tools the caller may call.
func (s *Server) listTools(c echo.Context) error {
	caller := callerOf(c)
	out := toolsView{Tools: []toolView{}}
	for _, t := range s.rt.Tools() {
		if caller.MayCall(t.Name) {
			out.Tools = append(out.Tools, newToolView(t))
		}
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) getExecution(c echo.Context) error {
	rec, err := s.rt.Execution(c.Request().Context(), *callerOf(c), c.Param("id"))
	if err != nil {
		return err
	}
	v := executionView(rec)
	return writeRecord(c, http.StatusOK, &v)
}

// findExecutions serves GET /v1/executions: a lookup by identity with
// request_id, else a listing of one session.
func (s *Server) findExecutions(c echo.Context) error {
	q := c.Request().URL.Query()
	if err := onlyParams(q, "request_id", "session_id", "limit", "cursor"); err != nil {
		return err
	}
	caller := *callerOf(c)
	session := q.Get("session_id")
	if q.Has("request_id") {
		if q.Has("limit") || q.Has("cursor") {
			return invalidField("request_id", "a lookup by request_id takes no limit or cursor")
		}
		rec, err := s.rt.Lookup(c.Request().Context(), caller, session, q.Get("request_id"))
		if err != nil {
			return err
		}
		v := executionView(rec)
		return writeRecord(c, http.StatusOK, &v)
	}
	limit := 0
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > store.MaxListLimit {
			return invalidField("limit", "limit must be an integer from 1 to "+strconv.Itoa(store.MaxListLimit))
		}
		limit = n
	}
	var before uint64
	if q.Has("cursor") {
		n, err := strconv.ParseUint(q.Get("cursor"), 10, 64)
		if err != nil || n == 0 {
			return invalidField("cursor", "cursor must be the next_cursor of an earlier page")
		}
		before = n
	}
	page, err := s.rt.List(c.Request().Context(), caller, session, limit, before)
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

// onlyParams refuses query parameters other than allowed, so a typo never
// silently changes what is asked.
func onlyParams(q url.Values, allowed ...string) error {
	for name := range q {
		known := false
		for _, a := range allowed {
			known = known || name == a
		}
		if !known {
			return invalidField(name, "unknown query parameter "+strconv.Quote(name))
		}
	}
	return nil
}

func (s *Server) cancelExecution(c echo.Context) error {
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	if body != nil {
		if err := decodeStrict(body, &struct{}{}); err != nil {
			return err
		}
	}
	rec, err := s.rt.Cancel(c.Request().Context(), *callerOf(c), c.Param("id"))
	if err != nil {
		return err
	}
	v := executionView(rec)
	return writeRecord(c, http.StatusOK, &v)
}

func (s *Server) resolveExecution(c echo.Context) error {
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	res, err := decodeResolve(body)
	if err != nil {
		return err
	}
	if res.Status == "released" {
		c.Set(auditActionKey, ActionRelease)
	}
	rec, err := s.rt.Resolve(c.Request().Context(), *callerOf(c), c.Param("id"), res)
	if err != nil {
		return err
	}
	v := executionView(rec)
	if res.Status == "released" {
		v.Released = true
	}
	return writeRecord(c, http.StatusOK, &v)
}
