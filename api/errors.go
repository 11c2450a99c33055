package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// statusOf maps every error code of docs/errors.md (store.Codes) to its HTTP status: the
// one place where errors become statuses.
var statusOf = map[string]int{
	store.CodeInvalidRequest:       http.StatusBadRequest,
	store.CodeUnauthorized:         http.StatusUnauthorized,
	store.CodeForbidden:            http.StatusForbidden,
	store.CodeUnknownTool:          http.StatusNotFound,
	store.CodeNotFound:             http.StatusNotFound,
	store.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	store.CodePayloadTooLarge:      http.StatusRequestEntityTooLarge,
	store.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	store.CodeConflict:             http.StatusConflict,
	store.CodeUncertain:            http.StatusConflict,
	store.CodeInvalidState:         http.StatusConflict,
	store.CodeCapacity:             http.StatusServiceUnavailable,
	store.CodeUnavailable:          http.StatusServiceUnavailable,
	store.CodeRateLimited:          http.StatusTooManyRequests,
	store.CodeInternal:             http.StatusInternalServerError,
}

// statusBeyondCode lists the statuses an error may answer with other than
// its code's, each with the one code it carries: the code stays the
// contract's (docs/errors.md has no code of its own for them), while the status
// tells a client more. An *Error of this package sets one (its status
// field); the error handler honours it only when it is listed here with
// that code.
//
//   - 431 Request Header Fields Too Large (RFC 6585), INVALID_REQUEST:
//     the request's headers are over the limit (headersTooLarge, and
//     OversizedHeadersAnswer where net/http refuses them itself).
//   - 421 Misdirected Request (RFC 9110), FORBIDDEN: the request's Host
//     is not one of the node's names (hosts.go), a guard against DNS
//     rebinding; the answer's `host` names it.
var statusBeyondCode = map[int]string{
	http.StatusRequestHeaderFieldsTooLarge: store.CodeInvalidRequest,
	http.StatusMisdirectedRequest:          store.CodeForbidden,
}

// Error is an error this package raises with a code, a message and extra
// envelope fields.
type Error struct {
	Code    string
	Message string
	Extra   map[string]any
	Err     error
	// status, when set, is the answer's status instead of the code's: one
	// of statusBeyondCode's, for its code.
	status int
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

// ErrorCode implements store.Coded.
func (e *Error) ErrorCode() string { return e.Code }

// Fields returns the envelope's extra members.
func (e *Error) Fields() map[string]any { return e.Extra }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func newError(code, msg string) *Error { return &Error{Code: code, Message: msg} }

func invalidField(field, msg string) *Error {
	return &Error{Code: store.CodeInvalidRequest, Message: msg, Extra: map[string]any{"field": field}}
}

// fielder is implemented by errors that add members to the envelope.
type fielder interface{ Fields() map[string]any }

// envelope is the error body of docs/errors.md.
type envelope struct {
	Error map[string]any `json:"error"`
}

// handleError is Echo's HTTPErrorHandler: every error leaves through it.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, msg, extra := s.classify(err, c)
	c.Set(outcomeKey, outcomeOfCode(code))
	c.Set(codeKey, code)
	status := statusOf[code]
	if ae := (*Error)(nil); errors.As(err, &ae) && ae.status != 0 && statusBeyondCode[ae.status] == code {
		status = ae.status
	}
	body := make(map[string]any, len(extra)+2)
	for k, v := range extra {
		body[k] = v
	}
	body["code"], body["message"] = code, msg
	c.Set(errorBodyKey, body)
	h := c.Response().Header()
	// A handler may have set success headers before it failed.
	h.Del("Idempotent-Replayed")
	switch {
	case code == store.CodeUncertain && body["status"] == store.StatusRunning:
		h.Set("Retry-After", "1")
	case status == http.StatusServiceUnavailable:
		h.Set("Retry-After", "1")
	case status == http.StatusUnauthorized:
		h.Set("WWW-Authenticate", s.challenge(c.Request()))
	}
	var werr error
	if c.Request().Method == http.MethodHead {
		werr = c.NoContent(status)
	} else {
		werr = c.JSON(status, envelope{Error: body})
	}
	if werr != nil {
		s.log.Debug("writing an error answer failed", slog.Any("err", werr))
	}
}

// classify turns err into an error code (docs/errors.md), a message and extra fields.
func (s *Server) classify(err error, c echo.Context) (code, msg string, extra map[string]any) {
	var he *echo.HTTPError
	if errors.As(err, &he) {
		if he.Internal != nil {
			if code := store.CodeOf(he.Internal); code != "" {
				return s.classify(he.Internal, c)
			}
		}
		switch he.Code {
		case http.StatusNotFound:
			return store.CodeNotFound, "no such route: " + c.Request().Method + " " + c.Request().URL.Path, nil
		case http.StatusMethodNotAllowed:
			return store.CodeMethodNotAllowed, "method " + c.Request().Method + " not allowed on " + c.Request().URL.Path, nil
		case http.StatusRequestEntityTooLarge:
			return store.CodePayloadTooLarge, "the body is over the limit", nil
		case http.StatusUnsupportedMediaType:
			return store.CodeUnsupportedMediaType, "the body must be application/json", nil
		case http.StatusUnauthorized:
			return store.CodeUnauthorized, "missing or unknown bearer token", nil
		case http.StatusForbidden:
			return store.CodeForbidden, "not allowed", nil
		case http.StatusBadRequest:
			return store.CodeInvalidRequest, "bad request", nil
		case http.StatusServiceUnavailable:
			return store.CodeUnavailable, "unavailable", nil
		}
		s.log.Error("unexpected HTTP error", slog.Int("status", he.Code), slog.Any("err", he))
		return store.CodeInternal, "internal error", nil
	}
	if code := store.CodeOf(err); code != "" {
		if _, known := statusOf[code]; known {
			if detail := store.DetailOf(err); detail != "" {
				// What the store's backend said (its address, user,
				// database) is for the node's log, not the answer.
				s.log.Warn("the store failed", slog.String("method", c.Request().Method),
					slog.String("path", c.Request().URL.Path), slog.String("err", detail))
			}
			var f fielder
			if errors.As(err, &f) {
				extra = f.Fields()
			}
			return code, err.Error(), extra
		}
	}
	if ended, ok := engine.RequestEnded(err); ok {
		return store.CodeUnavailable, ended.Error(), nil
	}
	s.log.Error("internal error", slog.String("method", c.Request().Method),
		slog.String("path", c.Request().URL.Path), slog.Any("err", err))
	return store.CodeInternal, "internal error", nil
}
