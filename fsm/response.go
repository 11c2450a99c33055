package fsm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/carmyhq/carmy/store"
)

// Response is the outcome of applying one command. It travels back to the
// proposer, across the network when a follower forwarded the command, so
// it is plain data: an error is carried as its SPEC code (SPEC §2.2,
// store.Code) and its fields, and rebuilt by Err into the same store error
// the state returned, so errors.Is works on the proposer exactly as on the
// leader.
type Response struct {
	Outcome store.Outcome
	// Record is the record the command produced or, with an error, the
	// one that refused it (INVALID_STATE, IDEMPOTENCY_CONFLICT).
	Record store.Record
	// Count is how many records an interrupt or expire changed.
	Count int
	// Code is the error's SPEC code, "" on success.
	Code store.Code
	// Message details an INVALID_REQUEST (what was wrong).
	Message string
	// Op is the operation an INVALID_STATE refused ("complete", …).
	Op string
	// Principal and Quota name the principal of an IDEMPOTENCY_CAPACITY
	// that is a *store.QuotaError, and the quota it reached. Without a
	// Principal the error is store.ErrCapacity itself.
	Principal string
	Quota     int
	// Bytes is the byte quota a *store.QuotaError reached (0: it was
	// Quota). Resource and Limit name the bound of a *store.CapacityError
	// (the store's bound on bytes); without them and a Principal the
	// error is store.ErrCapacity itself.
	Bytes    int64
	Resource string
	Limit    int64
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

// responseJSON is a Response on the wire.
//
// Before the SPEC codes, a Response carried its error as a token of its
// own in "error" ("capacity", "principal_capacity", "not_found",
// "invalid_state", "conflict", "invalid"), with a quota error's principal
// in "message" and its quota in "count", and a state error's operation in
// "message". A Response travels between nodes of possibly different
// builds (a follower of a rolling upgrade forwards to a leader of
// another), so both directions are kept readable: UnmarshalJSON reads the
// old token where "code" is missing, and MarshalJSON writes, beside the
// code and its fields, the old token, from which an older node rebuilds
// the same sentinel (a quota error reads there as a plain capacity error,
// and a state error without its operation's name).
type responseJSON struct {
	Outcome   store.Outcome `json:"outcome,omitempty"`
	Record    store.Record  `json:"record,omitzero"`
	Count     int           `json:"count,omitempty"`
	Code      store.Code    `json:"code,omitempty"`
	Message   string        `json:"message,omitempty"`
	Op        string        `json:"op,omitempty"`
	Principal string        `json:"principal,omitempty"`
	Quota     int           `json:"quota,omitempty"`
	Bytes     int64         `json:"bytes,omitempty"`
	Resource  string        `json:"resource,omitempty"`
	Limit     int64         `json:"limit,omitempty"`
	Legacy    string        `json:"error,omitempty"`
}

// The error tokens of builds before the SPEC codes.
const (
	legacyCapacity          = "capacity"
	legacyPrincipalCapacity = "principal_capacity"
	legacyNotFound          = "not_found"
	legacyInvalidState      = "invalid_state"
	legacyConflict          = "conflict"
	legacyInvalid           = "invalid"
)

// MarshalJSON implements json.Marshaler.
func (r Response) MarshalJSON() ([]byte, error) {
	w := responseJSON{
		Outcome: r.Outcome, Record: r.Record, Count: r.Count,
		Code: r.Code, Message: r.Message, Op: r.Op, Principal: r.Principal, Quota: r.Quota,
		Bytes: r.Bytes, Resource: r.Resource, Limit: r.Limit,
	}
	switch r.Code {
	case "":
	case store.CodeCapacity:
		w.Legacy = legacyCapacity
	case store.CodeNotFound:
		w.Legacy = legacyNotFound
	case store.CodeInvalidState:
		w.Legacy = legacyInvalidState
	case store.CodeConflict:
		w.Legacy = legacyConflict
	default:
		w.Legacy = legacyInvalid
	}
	return json.Marshal(w)
}

// UnmarshalJSON implements json.Unmarshaler.
func (r *Response) UnmarshalJSON(b []byte) error {
	var w responseJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = Response{
		Outcome: w.Outcome, Record: w.Record, Count: w.Count,
		Code: w.Code, Message: w.Message, Op: w.Op, Principal: w.Principal, Quota: w.Quota,
		Bytes: w.Bytes, Resource: w.Resource, Limit: w.Limit,
	}
	if w.Code != "" || w.Legacy == "" {
		return nil
	}
	// An older node's answer.
	switch w.Legacy {
	case legacyCapacity:
		r.Code = store.CodeCapacity
	case legacyPrincipalCapacity:
		r.Code, r.Principal, r.Quota, r.Count, r.Message = store.CodeCapacity, w.Message, w.Count, 0, ""
	case legacyNotFound:
		r.Code = store.CodeNotFound
	case legacyInvalidState:
		r.Code, r.Op, r.Message = store.CodeInvalidState, w.Message, ""
	case legacyConflict:
		r.Code = store.CodeConflict
	case legacyInvalid:
		r.Code = store.CodeInvalidRequest
	default:
		r.Code, r.Message = store.CodeInvalidRequest, w.Legacy+": "+w.Message
	}
	return nil
}
