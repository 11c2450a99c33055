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
	if err := s.refuseLargeWhenOverloaded(c); err != nil {
		return err
	}
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
	status := http.StatusOK
	switch {
	case resp.Awaiting:
		// Gated: the tool runs once someone approves it; every retry is
		// answered the same until then.
		status = http.StatusAccepted
		c.Set(outcomeKey, OutcomeAwaiting)
	case resp.Replayed:
		c.Response().Header().Set("Idempotent-Replayed", "true")
		c.Set(outcomeKey, OutcomeReplayed)
	case resp.Passthrough:
		c.Set(outcomeKey, OutcomePassthrough)
	default:
		c.Set(outcomeKey, OutcomeRan)
	}
	v := callView(resp)
	return writeRecord(c, status, &v)
}

// listTools serves GET /v1/tools: the tools the caller may call.
func (s *Server) listTools(c echo.Context) error {
	caller := callerOf(c)
	out := toolsView{Tools: []toolView{}}
	for _, t := range s.rt.ToolsFor(*caller) {
		out.Tools = append(out.Tools, newToolView(t))
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
	v := resolvedView(rec, res.Status == "released")
	return writeRecord(c, http.StatusOK, &v)
}
