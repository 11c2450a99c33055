package store

// Code is one of the error codes of the contract (docs/errors.md). It is
// defined here, the lowest package of the stack, once: the state machine's
// responses, the node-to-node calls (peer.Error) and the HTTP API all carry these codes,
// and only the API maps them to HTTP statuses.
type Code = string

// The error codes of the contract.
const (
	CodeInvalidRequest       Code = "INVALID_REQUEST"
	CodeUnauthorized         Code = "UNAUTHORIZED"
	CodeForbidden            Code = "FORBIDDEN"
	CodeUnknownTool          Code = "UNKNOWN_TOOL"
	CodeNotFound             Code = "NOT_FOUND"
	CodeMethodNotAllowed     Code = "METHOD_NOT_ALLOWED"
	CodePayloadTooLarge      Code = "PAYLOAD_TOO_LARGE"
	CodeUnsupportedMediaType Code = "UNSUPPORTED_MEDIA_TYPE"
	CodeConflict             Code = "IDEMPOTENCY_CONFLICT"
	CodeUncertain            Code = "EXECUTION_UNCERTAIN"
	CodeInvalidState         Code = "INVALID_STATE"
	CodeRateLimited          Code = "RATE_LIMITED"
	CodeCapacity             Code = "IDEMPOTENCY_CAPACITY"
	CodeUnavailable          Code = "UNAVAILABLE"
	CodeInternal             Code = "INTERNAL"
)

// Codes lists every code of the contract, in the order of docs/errors.md.
var Codes = []Code{
	CodeInvalidRequest, CodeUnauthorized, CodeForbidden, CodeUnknownTool, CodeNotFound,
	CodeMethodNotAllowed, CodePayloadTooLarge, CodeUnsupportedMediaType, CodeConflict,
	CodeUncertain, CodeInvalidState, CodeRateLimited, CodeCapacity, CodeUnavailable, CodeInternal,
}

// Error is an error with a code of the contract and a message. Packages
// above this one declare their sentinels with NewError instead of their own
// coded types, so errors.Is and CodeOf work at every layer.
type Error struct {
	code Code
	msg  string
}

// NewError returns an error carrying code and msg. Each call returns a
// distinct value: compare sentinels with errors.Is, never by code.
func NewError(code Code, msg string) *Error { return &Error{code: code, msg: msg} }

func (e *Error) Error() string { return e.msg }

// ErrorCode implements Coded.
func (e *Error) ErrorCode() Code { return e.code }

// WithMessage returns the same error told in other words: it matches e
// (errors.Is), carries e's code and reads msg. A layer that rebuilds an
// error received from elsewhere (another node) uses it to keep the
// sender's message.
func (e *Error) WithMessage(msg string) error { return &toldError{of: e, msg: msg} }

// toldError is an *Error with another message.
type toldError struct {
	of  *Error
	msg string
}

func (e *toldError) Error() string        { return e.msg }
func (e *toldError) ErrorCode() Code      { return e.of.code }
func (e *toldError) Is(target error) bool { return target == e.of }

// Sentinel returns the sentinel error of this package that carries code,
// or nil for a code no store returns (UNAUTHORIZED, RATE_LIMITED, …: the
// API's own). UNAVAILABLE is ErrUnavailable, "not applied":
// ErrCommitUnknown shares its code but is no outcome a code can name, so a
// layer that must tell "sent, outcome unknown" carries it otherwise.
func Sentinel(code Code) *Error {
	switch code {
	case CodeInvalidRequest:
		return ErrInvalid
	case CodeNotFound:
		return ErrNotFound
	case CodeConflict:
		return ErrConflict
	case CodeUncertain:
		return ErrUncertain
	case CodeInvalidState:
		return ErrInvalidState
	case CodeCapacity:
		return ErrCapacity
	case CodeUnavailable:
		return ErrUnavailable
	}
	return nil
}
