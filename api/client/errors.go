package client

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Error codes of docs/errors.md, as APIError.Code carries them.
const (
	CodeInvalidRequest       = "INVALID_REQUEST"
	CodeUnauthorized         = "UNAUTHORIZED"
	CodeForbidden            = "FORBIDDEN"
	CodeUnknownTool          = "UNKNOWN_TOOL"
	CodeNotFound             = "NOT_FOUND"
	CodeMethodNotAllowed     = "METHOD_NOT_ALLOWED"
	CodePayloadTooLarge      = "PAYLOAD_TOO_LARGE"
	CodeUnsupportedMediaType = "UNSUPPORTED_MEDIA_TYPE"
	CodeConflict             = "IDEMPOTENCY_CONFLICT"
	CodeUncertain            = "EXECUTION_UNCERTAIN"
	CodeInvalidState         = "INVALID_STATE"
	CodeCapacity             = "IDEMPOTENCY_CAPACITY"
	CodeUnavailable          = "UNAVAILABLE"
	CodeRateLimited          = "RATE_LIMITED"
	CodeInternal             = "INTERNAL"
)

// Sentinels for errors.Is. Each matches an *APIError (wherever it sits in
// a chain) whose Code is the one named; ErrInterrupted matches only an
// EXECUTION_UNCERTAIN whose execution is interrupted. ErrInvalid also
// matches a call the client refused before sending it (a bad argument).
var (
	ErrInvalid              error = &sentinel{code: CodeInvalidRequest}
	ErrUnauthorized         error = &sentinel{code: CodeUnauthorized}
	ErrForbidden            error = &sentinel{code: CodeForbidden}
	ErrUnknownTool          error = &sentinel{code: CodeUnknownTool}
	ErrNotFound             error = &sentinel{code: CodeNotFound}
	ErrMethodNotAllowed     error = &sentinel{code: CodeMethodNotAllowed}
	ErrPayloadTooLarge      error = &sentinel{code: CodePayloadTooLarge}
	ErrUnsupportedMediaType error = &sentinel{code: CodeUnsupportedMediaType}
	ErrConflict             error = &sentinel{code: CodeConflict}
	ErrUncertain            error = &sentinel{code: CodeUncertain}
	ErrInterrupted          error = &sentinel{code: CodeUncertain, status: StatusInterrupted}
	ErrInvalidState         error = &sentinel{code: CodeInvalidState}
	ErrCapacity             error = &sentinel{code: CodeCapacity}
	ErrUnavailable          error = &sentinel{code: CodeUnavailable}
	ErrRateLimited          error = &sentinel{code: CodeRateLimited}
	ErrInternal             error = &sentinel{code: CodeInternal}
)

// sentinel is an error code to match with errors.Is.
type sentinel struct {
	code   string
	status Status // when set, the execution status must match too
}

func (s *sentinel) Error() string {
	if s.status != "" {
		return "carmy: " + s.code + " (" + string(s.status) + ")"
	}
	return "carmy: " + s.code
}

// APIError is an error answer of a Carmy node: the envelope of docs/errors.md
// {"error":{"code":…,"message":…,…}} with its HTTP status. Match it with
// errors.Is against the Err… sentinels, or errors.As for the details.
type APIError struct {
	// Status is the HTTP status (409, 503, …).
	Status int
	// Code is the error code of docs/errors.md (IDEMPOTENCY_CONFLICT, …); Message is the
	// node's explanation, for people.
	Code    string
	Message string
	// ExecutionID is set for IDEMPOTENCY_CONFLICT, EXECUTION_UNCERTAIN and
	// INVALID_STATE: the execution the identity already names.
	ExecutionID string
	// ExecStatus is that execution's status for EXECUTION_UNCERTAIN
	// (running or interrupted) and INVALID_STATE (any status, or
	// StatusReleased for a call whose execution was released while its
	// tool ran).
	ExecStatus Status
	// Principal is set for RATE_LIMITED and a per-principal
	// IDEMPOTENCY_CAPACITY.
	Principal string
	// Field names the request member at fault for INVALID_REQUEST.
	Field string
	// ToolRan is the envelope's tool_ran, nil when absent: false on a
	// refusal before anything was reserved (UNAVAILABLE for load or the
	// running limits), true on UNAVAILABLE for a tool that ran but whose
	// outcome is not recorded yet (retry with the same request_id).
	ToolRan *bool
	// RetryAfter is the Retry-After header (0 when absent).
	RetryAfter time.Duration
	// Fields holds every member of the envelope's error object, those
	// above included, for codes or members this client does not know.
	Fields map[string]json.RawMessage
	// Body is the answer as the node sent it.
	Body []byte
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s: %s", e.Status, e.Code, e.Message)
	var extra []string
	if e.ExecutionID != "" && !strings.Contains(e.Message, e.ExecutionID) {
		extra = append(extra, "execution "+e.ExecutionID)
	}
	if e.ExecStatus != "" && !strings.Contains(e.Message, string(e.ExecStatus)) {
		extra = append(extra, "status "+string(e.ExecStatus))
	}
	if e.Field != "" {
		extra = append(extra, "field "+e.Field)
	}
	if len(extra) > 0 {
		b.WriteString(" (" + strings.Join(extra, ", ") + ")")
	}
	return b.String()
}

// Is matches the Err… sentinels by code.
func (e *APIError) Is(target error) bool {
	s, ok := target.(*sentinel)
	return ok && s.code == e.Code && (s.status == "" || s.status == e.ExecStatus)
}

// Uncertain reports whether e is EXECUTION_UNCERTAIN, and with which
// execution and status (StatusRunning or StatusInterrupted).
func (e *APIError) Uncertain() (executionID string, status Status, ok bool) {
	if e.Code != CodeUncertain {
		return "", "", false
	}
	return e.ExecutionID, e.ExecStatus, true
}

// ProtocolError is an answer that is not what docs/api.md promises: an error
// status without the error envelope (a proxy's HTML 502, an empty 504), or
// a success whose body is not the expected JSON.
type ProtocolError struct {
	Status      int
	ContentType string
	// Snippet is the start of the body, for diagnosis.
	Snippet string
	// RetryAfter is the Retry-After header (0 when absent).
	RetryAfter time.Duration
	// Err is the decoding error, when there was one.
	Err error
	// Body is the answer as it came (at most the client's bound on an
	// answer).
	Body []byte
}

func (e *ProtocolError) Error() string {
	ct := e.ContentType
	if ct == "" {
		ct = "no content type"
	}
	what := "is not a Carmy error envelope"
	if e.Status >= 200 && e.Status < 300 {
		what = "has a body that is not the expected JSON"
	}
	msg := fmt.Sprintf("HTTP %d answer %s (%s)", e.Status, what, ct)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Snippet != "" {
		msg += fmt.Sprintf("; body starts %q", e.Snippet)
	}
	return msg
}

// Unwrap returns the decoding error.
func (e *ProtocolError) Unwrap() error { return e.Err }

// RequestError wraps every error of a request the client sent (at least
// once): which operation, which identity for a call, how many attempts,
// and the last attempt's error (an *APIError, a *ProtocolError or a
// transport error), reachable with errors.Is and errors.As.
type RequestError struct {
	// Op is the method and path, e.g. "POST /v1/tools/call".
	Op string
	// Tool, RequestID and SessionID are set for a call: RequestID is the
	// one sent, generated when the caller gave none, so that the caller
	// can Lookup the identity later.
	Tool      string
	RequestID string
	SessionID string
	// Attempts is how many times the request was sent (attempts started,
	// one that the context cut short included).
	Attempts int
	// Err is the last attempt's error that says something about the call:
	// an attempt cut short by the context does not replace an earlier,
	// more telling error.
	Err error
	// Stopped is set when the context ended the retries (context.Canceled
	// or context.DeadlineExceeded; the latter also when the deadline left
	// no time for the next attempt).
	Stopped error
}

func (e *RequestError) Error() string {
	var b strings.Builder
	b.WriteString("carmy: ")
	b.WriteString(e.Op)
	if e.Tool != "" {
		fmt.Fprintf(&b, " (tool %s", e.Tool)
		if e.RequestID != "" {
			fmt.Fprintf(&b, ", request_id %s", e.RequestID)
		}
		if e.SessionID != "" {
			fmt.Fprintf(&b, ", session_id %s", e.SessionID)
		}
		b.WriteString(")")
	}
	if e.Attempts == 1 {
		b.WriteString(": 1 attempt")
	} else {
		fmt.Fprintf(&b, ": %d attempts", e.Attempts)
	}
	if e.Stopped != nil {
		fmt.Fprintf(&b, ", stopped: %v", e.Stopped)
	}
	if e.Err != nil {
		b.WriteString(": last error: ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the last error and, when the context stopped the
// retries, the context's error.
func (e *RequestError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.Stopped != nil {
		errs = append(errs, e.Stopped)
	}
	return errs
}

// usageError is a request the client refuses to send.
type usageError struct{ msg string }

func (e *usageError) Error() string { return "carmy: " + e.msg }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *usageError) Is(target error) bool { return target == ErrInvalid }

func usage(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}
