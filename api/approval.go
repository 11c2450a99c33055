package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// decisionBody is the body of POST /v1/executions/{id}/approve and
// …/deny: optional, and then only a reason.
type decisionBody struct {
	Reason string `json:"reason"`
}

func (s *Server) approveExecution(c echo.Context) error {
	return s.decideExecution(c, store.DecisionApprove)
}

func (s *Server) denyExecution(c echo.Context) error {
	return s.decideExecution(c, store.DecisionDeny)
}

// decideExecution serves a decision on an execution awaiting approval
// (docs/policy.md#approval-gates): the record as the decision left it
// (200); for an approval whose tool still runs when the request's wait
// ends, the running record (202). A decision on an execution that no
// longer awaits one is 409 INVALID_STATE with the record as it stands.
func (s *Server) decideExecution(c echo.Context, kind store.DecisionKind) error {
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	var b decisionBody
	if body != nil {
		if err := decodeStrict(body, &b); err != nil {
			return err
		}
	}
	rec, err := s.rt.Decide(c.Request().Context(), *callerOf(c), c.Param("id"), kind, b.Reason)
	status := http.StatusOK
	switch {
	case errors.Is(err, engine.ErrStillRunning):
		status = http.StatusAccepted
	case err != nil:
		return err
	}
	v := executionView(rec)
	return writeRecord(c, status, &v)
}
