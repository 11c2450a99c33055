package fsm

import (
	"errors"
	"fmt"

	"github.com/carmyhq/carmy/store"
)

// Response is the outcome of applying one command. It travels back to the
// proposer, across the network when a follower forwarded the command, so
// it is plain data: an error is carried as its error code (docs/errors.md,
// store.Code) and its fields, and rebuilt by Err into the same store error
// the state returned, so errors.Is works on the proposer exactly as on the
// leader. Between nodes it travels in its binary form (AppendResponse),
// which keeps every field exactly; its JSON (the field tags) does not keep
// a string that is not UTF-8 or a zone offset of seconds, and is for tests
// and tools.
type Response struct {
	Outcome store.Outcome `json:"outcome,omitempty"`
	// Record is the record the command produced or, with an error, the
	// one that refused it (INVALID_STATE, IDEMPOTENCY_CONFLICT).
	Record store.Record `json:"record,omitzero"`
	// Count is how many records an interrupt or expire changed.
	Count int `json:"count,omitempty"`
	// Code is the error's code (docs/errors.md), "" on success.
	Code store.Code `json:"code,omitempty"`
	// Message details an INVALID_REQUEST (what was wrong).
	Message string `json:"message,omitempty"`
	// Op is the operation an INVALID_STATE refused ("complete", …).
	Op string `json:"op,omitempty"`
	// Principal and Quota name the principal of an IDEMPOTENCY_CAPACITY
	// that is a *store.QuotaError, and the quota it reached. Without a
	// Principal the error is store.ErrCapacity itself.
	Principal string `json:"principal,omitempty"`
	Quota     int    `json:"quota,omitempty"`
	// Bytes is the byte quota a *store.QuotaError reached (0: it was
	// Quota). Resource and Limit name the bound of a *store.CapacityError
	// (the store's bound on bytes); without them and a Principal the
	// error is store.ErrCapacity itself.
	Bytes    int64  `json:"bytes,omitempty"`
	Resource string `json:"resource,omitempty"`
	Limit    int64  `json:"limit,omitempty"`
}

// responseOf builds the Response of an application that returned rec and
// err.
func responseOf(rec store.Record, err error) Response {
	if err == nil {
		return Response{Record: rec}
	}
	var (
		se *store.StateError
		ce *store.ConflictError
		qe *store.QuotaError
		cp *store.CapacityError
	)
	switch {
	case errors.As(err, &se):
		return Response{Code: store.CodeInvalidState, Record: se.Record, Op: se.Op}
	case errors.As(err, &ce):
		return Response{Code: store.CodeConflict, Record: ce.Record}
	case errors.As(err, &qe):
		return Response{Code: store.CodeCapacity, Principal: qe.Principal, Quota: qe.Quota, Bytes: qe.Bytes}
	case errors.As(err, &cp):
		return Response{Code: store.CodeCapacity, Resource: cp.Resource, Limit: cp.Limit}
	case errors.Is(err, store.ErrCapacity):
		return Response{Code: store.CodeCapacity}
	case errors.Is(err, store.ErrNotFound):
		return Response{Code: store.CodeNotFound}
	}
	return invalidResponse(err.Error())
}

// invalidResponse refuses a command as INVALID_REQUEST, saying why.
func invalidResponse(msg string) Response {
	return Response{Code: store.CodeInvalidRequest, Message: msg}
}

// Err rebuilds the store error the Response carries (nil when none): the
// sentinel itself for a code without fields, the typed error
// (*store.StateError, *store.ConflictError, *store.QuotaError) with its
// fields otherwise. A code this build does not know is a refusal it cannot
// name: it matches store.ErrInvalid.
func (r Response) Err() error {
	switch r.Code {
	case "":
		return nil
	case store.CodeCapacity:
		if r.Principal != "" {
			return &store.QuotaError{Principal: r.Principal, Quota: r.Quota, Bytes: r.Bytes}
		}
		if r.Resource != "" {
			return &store.CapacityError{Resource: r.Resource, Limit: r.Limit}
		}
		return store.ErrCapacity
	case store.CodeNotFound:
		return store.ErrNotFound
	case store.CodeInvalidState:
		return &store.StateError{Op: r.Op, Record: r.Record}
	case store.CodeConflict:
		return &store.ConflictError{Record: r.Record}
	case store.CodeInvalidRequest:
		if r.Message == "" {
			return store.ErrInvalid
		}
		return store.ErrInvalid.WithMessage(r.Message)
	}
	return store.ErrInvalid.WithMessage(fmt.Sprintf("%s: %s", r.Code, r.Message))
}
