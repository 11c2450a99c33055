package peer

import (
	"errors"
	"fmt"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// MaxCommandBytes bounds one encoded command, on every node alike: a node
// refuses a larger one (store.ErrInvalid) before it is proposed or
// forwarded. The largest command Carmy makes is a completion or a
// resolution: the identity (a principal, a session_id and a request_id of
// up to 255 bytes each), a fingerprint and an execution id, the result's
// data (bounded by the runtime's result limit, 1 MiB by default) or the
// resolution's (bounded by the API's body limit, 1 MiB by default), a
// tool error's object and a few hundred bytes of JSON: about 2 MiB at the
// defaults. 64 MiB leaves room for operators who raise those limits.
const MaxCommandBytes = 64 << 20

// The outcomes of one attempt at a write that are no outcome of the
// contract; a node retries both until a leader takes the write.
var (
	// ErrNotLeader: the node asked is not the leader; nothing was applied.
	ErrNotLeader = errors.New("cluster: not the leader")
	// ErrNotSent: the leader could not be reached; nothing was sent.
	ErrNotSent = errors.New("cluster: leader unreachable")
	// ErrRefused: the node asked refused this one as a member (wrong
	// cluster key or certificate, another protocol version); nothing was
	// applied.
	ErrRefused = errors.New("cluster: refused as a member")
)

// Result is the outcome of one forwarded command: the Response of
// its application, or the error of the attempt.
type Result struct {
	Response *fsm.Response `json:"response,omitempty"`
	Error
}

// Error is an error as it travels from one node to another, in an error
// answer or in one command's result.
//
// An outcome of the contract travels as its error code (Code, with
// Message), from which the receiver rebuilds the store error with that
// code (store.Sentinel), so errors.Is works on both nodes alike. Two
// states of one attempt are no such outcome, and travel as State instead:
// StateNotLeader (the node asked does not lead: nothing was applied, ask
// the leader) and StateCommitUnknown (the command was proposed, whether it
// committed is unknown: store.ErrCommitUnknown, which no code names, so it
// can never be read back as a refusal).
type Error struct {
	Code    store.Code `json:"code,omitempty"`
	State   string     `json:"state,omitempty"`
	Message string     `json:"message,omitempty"`
}

// The states of an attempt.
const (
	StateNotLeader     = "not_leader"
	StateCommitUnknown = "commit_unknown"
)

// ErrorOf is how err travels to another node: a state, or its error code (an
// error without one is UNAVAILABLE: nothing was applied).
func ErrorOf(err error) Error {
	msg := err.Error()
	switch {
	case errors.Is(err, ErrNotLeader):
		return Error{State: StateNotLeader, Message: msg}
	case errors.Is(err, store.ErrCommitUnknown):
		return Error{State: StateCommitUnknown, Message: msg}
	}
	code := store.CodeOf(err)
	if code == "" {
		code = store.CodeUnavailable
	}
	return Coded(code, msg)
}

// Coded is an outcome of the contract.
func Coded(code store.Code, msg string) Error {
	return Error{Code: code, Message: msg}
}

// IsError reports whether w carries an error at all.
func (w Error) IsError() bool { return w.Code != "" || w.State != "" }

// Err rebuilds the error w carries (nil when none): ErrNotLeader, an
// error that matches store.ErrCommitUnknown and nothing else, or the store
// error of its code. A code no store error carries (a newer build's)
// keeps its code, so the API still answers with it.
func (w Error) Err() error {
	switch {
	case w.State == StateNotLeader:
		return told(ErrNotLeader, w.Message)
	case w.State == StateCommitUnknown:
		return told(store.ErrCommitUnknown, w.Message)
	case w.State != "":
		// A state of a newer build: whether anything was applied is
		// not known.
		return fmt.Errorf("%w: %s: %s", store.ErrCommitUnknown, w.State, w.Message)
	case w.Code == "":
		return nil
	}
	if s := store.Sentinel(w.Code); s != nil {
		if w.Message == "" {
			return s
		}
		return s.WithMessage(w.Message)
	}
	return store.NewError(w.Code, w.Message)
}

// told returns sentinel with the sender's message, when it has one.
func told(sentinel error, msg string) error {
	switch {
	case msg == "":
		return sentinel
	case msg == sentinel.Error():
		return sentinel
	}
	if e, ok := sentinel.(*store.Error); ok {
		return e.WithMessage(msg)
	}
	return fmt.Errorf("%w (%s)", sentinel, msg)
}
