package engine

import (
	"errors"
	"fmt"

	"github.com/carmyhq/carmy/store"
)

// Sentinel errors of the runtime. Each carries an error code of docs/errors.md
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
	// Reason, when set, says why instead (a decision on one's own call).
	Reason string
}

func (e *ForbiddenError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("principal %q: %s", e.Principal, e.Reason)
	}
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

// Error codes recorded in results (docs/errors.md#result-error-codes).
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

// The limits of the running set a *BusyError names.
const (
	// LimitMaxRunning: the node runs MaxRunning tools already.
	LimitMaxRunning = "max_running"
	// LimitMaxRunningPerPrincipal: the principal runs its share of the
	// node's tools already (MaxRunningPerPrincipal).
	LimitMaxRunningPerPrincipal = "max_running_per_principal"
	// LimitAdminReserve: the principals other than the admin run all the
	// slots they may take together; the ones left are kept for the admin.
	LimitAdminReserve = "admin_reserve"
	// LimitMaxInflightBytes: the calls running on the node hold
	// MaxInflightBytes of arguments and results in flight already.
	LimitMaxInflightBytes = "max_inflight_bytes"
	// LimitSlowOutcomes: a reservation or a result of a call on this node
	// has waited for the store longer than N milliseconds (a quarter of
	// the store timeout); new calls wait until writes are faster.
	LimitSlowOutcomes = "slow_outcomes"
)

// BusyError answers a call that would run more tools at once on this node
// than a limit allows (Limit, at N). It is refused before anything is
// reserved: the tool did not run, and a retry (later, or on another node,
// whose running set is its own) may succeed. It carries UNAVAILABLE, like
// every refusal of the node's capacity to run tools, and the envelope
// names the principal when the bound is the principal's own (its share, or
// the admin's reserve).
type BusyError struct {
	Principal string
	Limit     string
	N         int
}

func (e *BusyError) Error() string {
	switch e.Limit {
	case LimitMaxRunningPerPrincipal:
		return fmt.Sprintf("principal %q already runs %d tools on this node, its share (limits.max_running_per_principal); "+
			"the tool did not run and nothing was reserved: retry later or on another node", e.Principal, e.N)
	case LimitAdminReserve:
		return fmt.Sprintf("the principals other than the admin already run %d tools on this node, all they may run together "+
			"(limits.max_running less the admin's reserve); the tool did not run and nothing was reserved: retry later or on another node", e.N)
	case LimitMaxInflightBytes:
		return fmt.Sprintf("the calls on this node already hold %d bytes of arguments and results in flight, its limit (--max-inflight-bytes); "+
			"the tool did not run and nothing was reserved: retry later or on another node", e.N)
	case LimitSlowOutcomes:
		return fmt.Sprintf("the calls on this node wait for the store longer than %d ms, so it takes no more for now; "+
			"the tool did not run and nothing was reserved: retry later or on another node", e.N)
	}
	return fmt.Sprintf("this node already runs %d tools, its limit (limits.max_running); "+
		"the tool did not run and nothing was reserved: retry later or on another node", e.N)
}

// ErrorCode implements store.Coded.
func (e *BusyError) ErrorCode() string { return store.CodeUnavailable }

// Is makes errors.Is(err, store.ErrUnavailable) true: nothing was applied.
func (e *BusyError) Is(target error) bool { return target == store.ErrUnavailable }

// The resources a *BusyError names in the envelope: the tools running at
// once on a node, or the bytes their calls hold in flight.
const (
	ResourceRunning       = "running"
	ResourceInflightBytes = "inflight_bytes"
)

// FieldToolRan is the envelope member that tells, on a 503 UNAVAILABLE,
// whether the tool ran: false on a refusal made before anything was
// reserved (*BusyError) and on a reservation the store could not take or
// confirm (*notReservedError), true when the tool ran but its outcome is
// not recorded yet (*UnrecordedError).
const FieldToolRan = "tool_ran"

// Fields returns the envelope's extra members, named as a capacity error's
// are: "resource" ("running" or "inflight_bytes"), "limit" (N), the
// principal when the bound is its own (its share, or the admin's
// reserve), and "tool_ran": false.
func (e *BusyError) Fields() map[string]any {
	res := ResourceRunning
	if e.Limit == LimitMaxInflightBytes || e.Limit == LimitSlowOutcomes {
		res = ResourceInflightBytes
	}
	f := map[string]any{"resource": res, "limit": e.N, FieldToolRan: false}
	if e.Principal != "" {
		f["principal"] = e.Principal
	}
	return f
}

// reason names the refusal for a RefusalObserver.
func (why refusal) reason() string {
	switch why {
	case refusedShare:
		return LimitMaxRunningPerPrincipal
	case refusedAdminReserve:
		return LimitAdminReserve
	case refusedBytes:
		return LimitMaxInflightBytes
	case refusedSlow:
		return LimitSlowOutcomes
	}
	return LimitMaxRunning
}

// UnrecordedError answers a call whose tool ran but whose outcome was not
// recorded within the wait (the store timeout and the tool's timeout): the
// outcome is still being recorded in the background, and a retry with the
// same identity is answered with it once it is (meanwhile 409
// EXECUTION_UNCERTAIN). It carries UNAVAILABLE; the envelope names the
// execution and says "tool_ran": true, which no refusal for load says.
type UnrecordedError struct {
	ExecutionID string
	Cause       error
}

func (e *UnrecordedError) Error() string {
	return fmt.Sprintf("%v: the tool ran but its outcome is not recorded yet (%v); retry with the same request_id", store.ErrUnavailable, e.Cause)
}

// Unwrap returns store.ErrUnavailable and the cause.
func (e *UnrecordedError) Unwrap() []error { return []error{store.ErrUnavailable, e.Cause} }

// ErrorCode implements store.Coded.
func (e *UnrecordedError) ErrorCode() string { return store.CodeUnavailable }

// Fields returns the envelope's extra members: "execution_id" and
// "tool_ran": true.
func (e *UnrecordedError) Fields() map[string]any {
	return map[string]any{"execution_id": e.ExecutionID, FieldToolRan: true}
}

// notReservedError answers a call whose reservation the store could not
// take (UNAVAILABLE: nothing was reserved) or whose commit it could not
// confirm (a reservation that may have been made is released in the
// background: reserveFailed). Either way the tool did not run: the
// envelope says "tool_ran": false, and a retry with the same request_id is
// safe. Err is the whole answer, matching what it wraps.
type notReservedError struct{ err error }

func (e *notReservedError) Error() string { return e.err.Error() }

// Unwrap returns the store's error, as described.
func (e *notReservedError) Unwrap() error { return e.err }

// ErrorCode implements store.Coded.
func (e *notReservedError) ErrorCode() string { return store.CodeUnavailable }

// Fields returns the envelope's extra member "tool_ran": false.
func (e *notReservedError) Fields() map[string]any { return map[string]any{FieldToolRan: false} }
