package fsm

import (
	"errors"

	"github.com/carmyhq/carmy/store"
)

// Response is the outcome of applying one command. It travels back to the
// proposer, across the network when a follower forwarded the command, so
// it is plain data: errors are carried as a code and rebuilt by Err.
type Response struct {
	Outcome store.Outcome `json:"outcome,omitempty"`
	Record  store.Record  `json:"record,omitzero"`
	// Count is how many records an interrupt or expire changed; with
	// ErrCodePrincipalCapacity, the quota the principal reached.
	Count int `json:"count,omitempty"`
	// Error is one of the error codes below, "" on success.
	Error string `json:"error,omitempty"`
	// Message details the error; with ErrCodePrincipalCapacity it is the
	// principal.
	Message string `json:"message,omitempty"`
}

// Error codes of a Response.
const (
	ErrCodeCapacity     = "capacity"
	ErrCodeNotFound     = "not_found"
	ErrCodeInvalidState = "invalid_state"
	ErrCodeConflict     = "conflict"
	ErrCodeInvalid      = "invalid"

	// ErrCodePrincipalCapacity is a *store.QuotaError: Message carries
	// its principal and Count its quota. It matches store.ErrCapacity as
	// ErrCodeCapacity does.
	ErrCodePrincipalCapacity = "principal_capacity"
)

// responseOf builds the Response of an application that returned rec (or
// n) and err.
func responseOf(rec store.Record, err error) Response {
	if err == nil {
		return Response{Record: rec}
	}
	var (
		se *store.StateError
		ce *store.ConflictError
		qe *store.QuotaError
	)
	switch {
	case errors.As(err, &se):
		return Response{Error: ErrCodeInvalidState, Record: se.Record, Message: se.Op}
	case errors.As(err, &ce):
		return Response{Error: ErrCodeConflict, Record: ce.Record}
	case errors.As(err, &qe):
		return Response{Error: ErrCodePrincipalCapacity, Message: qe.Principal, Count: qe.Quota}
	case errors.Is(err, store.ErrCapacity):
		return Response{Error: ErrCodeCapacity}
	case errors.Is(err, store.ErrNotFound):
		return Response{Error: ErrCodeNotFound}
	}
	return Response{Error: ErrCodeInvalid, Message: err.Error()}
}

// Err rebuilds the store error the Response carries (nil when none), so
// errors.Is works on the proposer exactly as on the leader.
func (r Response) Err() error {
	switch r.Error {
	case "":
		return nil
	case ErrCodeCapacity:
		return store.ErrCapacity
	case ErrCodePrincipalCapacity:
		return &store.QuotaError{Principal: r.Message, Quota: r.Count}
	case ErrCodeNotFound:
		return store.ErrNotFound
	case ErrCodeInvalidState:
		return &store.StateError{Op: r.Message, Record: r.Record}
	case ErrCodeConflict:
		return &store.ConflictError{Record: r.Record}
	}
	return errors.Join(store.ErrInvalid, errors.New(r.Message))
}
