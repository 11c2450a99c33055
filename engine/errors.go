package engine

import (
	"errors"
	"fmt"

	"github.com/carmyhq/carmy/store"
)

// Sentinel errors of the runtime. Each carries a SPEC §2.2 code
// (store.Coded), so the HTTP layer maps it without knowing this package.
var (
	// ErrUnknownTool: no tool of that name is registered.
	ErrUnknownTool = store.NewError(store.CodeUnknownTool, "no such tool")
	// ErrForbidden: the caller may not call this tool (a *ForbiddenError
	// says which).
	ErrForbidden = store.NewError(store.CodeForbidden, "not allowed")
	// ErrClosed: the runtime is shutting down and takes no new calls.
	ErrClosed = store.NewError(store.CodeUnavailable, "the node is shutting down")
)

// ForbiddenError says that a principal may not call a tool: it is outside
// the caller's Tools. It matches ErrForbidden and carries its code,
// FORBIDDEN.
type ForbiddenError struct {
	Principal string
	Tool      string
}

func (e *ForbiddenError) Error() string {
	return fmt.Sprintf("principal %q may not call tool %q", e.Principal, e.Tool)
}

// ErrorCode implements store.Coded.
func (e *ForbiddenError) ErrorCode() string { return store.CodeForbidden }

// Is makes errors.Is(err, ErrForbidden) true.
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

// invalid returns an INVALID_REQUEST error naming field.
func invalid(field, format string, args ...any) error {
	return &store.FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// ToolError is an error a tool returns to choose the recorded error code
// (default TOOL_ERROR). Details, when set, are merged into the recorded error
// object beside "code" and "message".
type ToolError struct {
	Code    string
	Message string
	Details map[string]any
}

func (e *ToolError) Error() string { return e.Code + ": " + e.Message }

// toolErrorOf returns the ToolError err carries, or a TOOL_ERROR one.
func toolErrorOf(err error) *ToolError {
	var te *ToolError
	if errors.As(err, &te) && te.Code != "" {
		return te
	}
	return &ToolError{Code: CodeToolError, Message: err.Error()}
}

// Error codes recorded in results (SPEC §2.1).
const (
	CodeToolError      = "TOOL_ERROR"
	CodeTimeout        = "TIMEOUT"
	CodeCancelled      = "CANCELLED"
	CodeResultTooLarge = "RESULT_TOO_LARGE"
)

// releasedError answers the caller of an execution that was released
// while its tool ran: the outcome was discarded, not recorded.
type releasedError struct{ rec store.Record }

func (e *releasedError) Error() string {
	return fmt.Sprintf("execution %s was released while its tool ran; its outcome was not recorded", e.rec.ExecutionID)
}

// ErrorCode implements store.Coded.
func (e *releasedError) ErrorCode() string { return store.ErrInvalidState.ErrorCode() }

// Is makes errors.Is(err, store.ErrInvalidState) true.
func (e *releasedError) Is(target error) bool { return target == store.ErrInvalidState }

// Fields returns the envelope's extra members.
func (e *releasedError) Fields() map[string]any {
	return map[string]any{"execution_id": e.rec.ExecutionID, "status": "released"}
}
