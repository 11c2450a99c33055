package engine

import (
	"errors"
	"fmt"

	"github.com/carmyhq/carmy/store"
)

// What a tool that calls an upstream learned about its request, when no
// whole answer came back. The tool says which by returning (or wrapping)
// one of these; the runtime then settles the execution as docs/guarantees.md says:
//
//   - ErrNotSent: not one byte of the request left this node (the
//     connection was refused, the name did not resolve, the TLS handshake
//     failed, the upstream was known to be down, a stdio child was not
//     running), or the upstream refused it unread (an MCP server answers
//     404 to a request on a session it no longer knows). The tool cannot
//     have had an effect, so the reservation is released, nothing is
//     recorded, and the caller is answered UNAVAILABLE: its retry runs
//     the tool.
//   - ErrAnswerLost: the request left (some or all of it) but no whole
//     answer came back (the connection broke, the child died, the answer
//     was cut short). The effect may have happened, so the execution
//     becomes interrupted, and the call and its retries answer
//     EXECUTION_UNCERTAIN until it is reconciled.
//
// Decide between them at the transport — whether any byte of the request
// was written, or the status it was refused with — never from an error's
// text. When in doubt, the request
// was sent: a false "sent" leaves an execution to reconcile, a false "not
// sent" could run a tool twice.
var (
	ErrNotSent    = errors.New("the request was never sent to the upstream")
	ErrAnswerLost = errors.New("the request reached the upstream but no whole answer came back")
)

// NotSentError is a tool's ErrNotSent with the reason (for the caller's
// message and the log): it names no URL or secret.
type NotSentError struct {
	Reason string
	Err    error // the transport's error, for the log; may be nil
}

func (e *NotSentError) Error() string { return ErrNotSent.Error() + ": " + e.Reason }

// Is makes errors.Is(err, ErrNotSent) true.
func (e *NotSentError) Is(target error) bool { return target == ErrNotSent }

// Unwrap returns the transport's error.
func (e *NotSentError) Unwrap() error { return e.Err }

// AnswerLostError is a tool's ErrAnswerLost with the reason.
type AnswerLostError struct {
	Reason string
	Err    error // the transport's error, for the log; may be nil
}

func (e *AnswerLostError) Error() string { return ErrAnswerLost.Error() + ": " + e.Reason }

// Is makes errors.Is(err, ErrAnswerLost) true.
func (e *AnswerLostError) Is(target error) bool { return target == ErrAnswerLost }

// Unwrap returns the transport's error.
func (e *AnswerLostError) Unwrap() error { return e.Err }

// reason returns what a NotSentError or AnswerLostError in err says, or
// err's text.
func fateReason(err error) string {
	var ns *NotSentError
	if errors.As(err, &ns) {
		return ns.Reason
	}
	var al *AnswerLostError
	if errors.As(err, &al) {
		return al.Reason
	}
	return err.Error()
}

// notSentAnswer is what the caller of a call whose request never left is
// told: UNAVAILABLE (503 with Retry-After), nothing recorded.
func notSentAnswer(tool string, err error) error {
	return &notSentRefusal{tool: tool, reason: fateReason(err)}
}

// notSentRefusal is the UNAVAILABLE answer of notSentAnswer.
type notSentRefusal struct{ tool, reason string }

func (e *notSentRefusal) Error() string {
	return fmt.Sprintf("tool %s did not run: its request was never sent (%s); nothing was recorded: retry with the same request_id", e.tool, e.reason)
}

// ErrorCode implements store.Coded.
func (e *notSentRefusal) ErrorCode() string { return store.CodeUnavailable }

// Is makes errors.Is(err, store.ErrUnavailable) true and errors.Is(err,
// ErrNotSent) too.
func (e *notSentRefusal) Is(target error) bool {
	return target == store.ErrUnavailable || target == ErrNotSent
}
