package store

import (
	"errors"
	"fmt"
)

// Coded is implemented by errors that carry one of the error codes of docs/errors.md.
// The HTTP layer turns the code into a status; Fields adds the envelope's
// extra members (execution_id, status, field).
type Coded interface {
	error
	ErrorCode() string
}

// Sentinel errors. Stores return them (or errors wrapping them) so that
// errors.Is works at every layer.
var (
	// ErrNotFound: no record for that identity or execution id.
	ErrNotFound = NewError(CodeNotFound, "no such execution")
	// ErrCapacity: the store is full; nothing was reserved (fail closed).
	ErrCapacity = NewError(CodeCapacity, "the idempotency store is full")
	// ErrUnavailable: the store cannot take writes now (no leader or no
	// quorum); the operation was not applied.
	ErrUnavailable = NewError(CodeUnavailable, "the store is unavailable")
	// ErrCommitUnknown: the operation was proposed but whether it was
	// applied is not known (a leader was lost mid-commit). The caller must
	// find out, never assume either way.
	ErrCommitUnknown = NewError(CodeUnavailable, "the outcome of the write is unknown")
	// ErrInvalidState: the record's status (or owner) does not allow the
	// operation. Stores return a *StateError, which matches it.
	ErrInvalidState = NewError(CodeInvalidState, "the execution's status does not allow this")
	// ErrInvalid: a malformed argument (empty key, bad result).
	ErrInvalid = NewError(CodeInvalidRequest, "invalid store argument")
	// ErrConflict: same identity, different fingerprint. See ConflictError.
	ErrConflict = NewError(CodeConflict, "request_id was already used with different arguments")
	// ErrUncertain: same identity, still running or interrupted. See
	// UncertainError.
	ErrUncertain = NewError(CodeUncertain, "an execution of this request is not finished")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// StateError says that Record's status or owner does not allow Op.
type StateError struct {
	Op     string
	Record Record
}

func (e *StateError) Error() string {
	return fmt.Sprintf("%s: execution %s is %s", e.Op, e.Record.ExecutionID, e.Record.Status)
}

// ErrorCode implements Coded.
func (e *StateError) ErrorCode() string { return ErrInvalidState.code }

// Is makes errors.Is(err, ErrInvalidState) true.
func (e *StateError) Is(target error) bool { return target == ErrInvalidState }

// Fields returns the envelope's extra members.
func (e *StateError) Fields() map[string]any {
	return map[string]any{"execution_id": e.Record.ExecutionID, "status": e.Record.Status}
}

// ConflictError says that the identity was used with a different fingerprint.
type ConflictError struct{ Record Record }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s (execution %s)", ErrConflict.msg, e.Record.ExecutionID)
}

// ErrorCode implements Coded.
func (e *ConflictError) ErrorCode() string { return ErrConflict.code }

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Fields returns the envelope's extra members.
func (e *ConflictError) Fields() map[string]any {
	return map[string]any{"execution_id": e.Record.ExecutionID}
}

// UncertainError says that the identity's execution is running or
// interrupted, so its outcome is not known and the tool must not run again.
type UncertainError struct{ Record Record }

func (e *UncertainError) Error() string {
	return fmt.Sprintf("%s: execution %s is %s", ErrUncertain.msg, e.Record.ExecutionID, e.Record.Status)
}

// ErrorCode implements Coded.
func (e *UncertainError) ErrorCode() string { return ErrUncertain.code }

// Is makes errors.Is(err, ErrUncertain) true.
func (e *UncertainError) Is(target error) bool { return target == ErrUncertain }

// Fields returns the envelope's extra members.
func (e *UncertainError) Fields() map[string]any {
	return map[string]any{"execution_id": e.Record.ExecutionID, "status": e.Record.Status}
}

// The resources a store bounds, as QuotaError and CapacityError name them
// (the envelope's "resource").
const (
	ResourceEntries = "entries"
	ResourceBytes   = "bytes"
)

// QuotaError says that a reservation of a new identity was refused because
// its principal already holds its quota of records (Execution.Quota), or
// of bytes (Execution.ByteQuota, when Bytes > 0). Nothing was reserved and
// nothing is evicted. It matches ErrCapacity and carries its code,
// IDEMPOTENCY_CAPACITY, so capacity handling applies to it as it is; the
// envelope adds the principal, the resource and the limit.
type QuotaError struct {
	Principal string
	Quota     int
	// Bytes, when positive, is the byte quota that refused the
	// reservation; Quota is then not the reason.
	Bytes int64
}

func (e *QuotaError) Error() string {
	if e.Bytes > 0 {
		return fmt.Sprintf("principal %q holds its quota of %d bytes (no room for one more record and its result)", e.Principal, e.Bytes)
	}
	return fmt.Sprintf("principal %q holds its quota of %d records", e.Principal, e.Quota)
}

// Resource returns the quota reached: ResourceEntries or ResourceBytes.
func (e *QuotaError) Resource() string {
	if e.Bytes > 0 {
		return ResourceBytes
	}
	return ResourceEntries
}

// ErrorCode implements Coded.
func (e *QuotaError) ErrorCode() string { return ErrCapacity.code }

// Is makes errors.Is(err, ErrCapacity) true.
func (e *QuotaError) Is(target error) bool { return target == ErrCapacity }

// Fields returns the envelope's extra members.
func (e *QuotaError) Fields() map[string]any {
	limit := int64(e.Quota)
	if e.Bytes > 0 {
		limit = e.Bytes
	}
	return map[string]any{"principal": e.Principal, "resource": e.Resource(), "limit": limit}
}

// CapacityError says that a reservation was refused because the store
// holds its bound on bytes (Limit): the record and its headroom would not
// fit. Nothing was reserved and nothing is evicted. It matches ErrCapacity
// and carries IDEMPOTENCY_CAPACITY; the envelope names the resource and
// the limit, and no principal (the bound is the store's). A store full of
// records (its bound on entries) answers ErrCapacity itself.
type CapacityError struct {
	Resource string
	Limit    int64
}

func (e *CapacityError) Error() string {
	return fmt.Sprintf("%s: it holds its bound of %d %s", ErrCapacity.msg, e.Limit, e.Resource)
}

// ErrorCode implements Coded.
func (e *CapacityError) ErrorCode() string { return ErrCapacity.code }

// Is makes errors.Is(err, ErrCapacity) true.
func (e *CapacityError) Is(target error) bool { return target == ErrCapacity }

// Fields returns the envelope's extra members.
func (e *CapacityError) Fields() map[string]any {
	return map[string]any{"resource": e.Resource, "limit": e.Limit}
}

// CodeOf returns the error code (docs/errors.md) carried by err, or "" when it carries none.
func CodeOf(err error) string {
	var c Coded
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	return ""
}
