package cluster

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// The internal endpoints, served under the node's HTTP address. Only
// cluster members may call them: over mutual TLS with a node certificate
// with node TLS, with the cluster key when one is set (both when both
// are); never on the strength of their address.
const (
	pathReadIndex = "/internal/v1/readindex"
	pathJoin      = "/internal/v1/join"
	pathRemove    = "/internal/v1/remove"
	pathState     = "/internal/v1/state"
	// InternalPrefix is the path prefix the internal handler serves.
	InternalPrefix = "/internal/"
	keyHeader      = "Carmy-Cluster-Key"
	// nodeIDHeader names the calling node (for the audit log; a claim,
	// not a credential).
	nodeIDHeader = "Carmy-Node-Id"
)

// Size bounds of the node-to-node wire.
//
// maxCommandBytes bounds one encoded command, on every node alike: Apply
// refuses a larger one (store.ErrInvalid) before it is proposed or
// forwarded. The largest command Carmy makes is a completion or a
// resolution: the identity (a principal, a session_id and a request_id of
// up to 255 bytes each), a fingerprint and an execution id, the result's
// data (bounded by the runtime's result limit, 1 MiB by default) or the
// resolution's (bounded by the API's body limit, 1 MiB by default), a
// tool error's object and a few hundred bytes of JSON: about 2 MiB at the
// defaults. 64 MiB, the old body limit, leaves room for operators who
// raise those limits, and no command that went through before is refused.
//
// maxBatchFrame, the largest forward stream frame a leader reads, holds
// the largest batch a forwarder builds: a single command of up to
// maxCommandBytes (or maxBatchBytes of smaller ones, less), plus the
// frame's envelope (a flag byte and a length per command: a few KiB for
// maxBatch commands; 64 KiB is ample).
//
// maxAnswerFrame bounds an answer frame a follower reads. An answer may be
// larger than its batch (a reservation that turns out a replay carries the
// record's data back), so it is bounded only against a broken peer; an
// answer over it leaves its commands' outcomes unknown, like a lost one.
//
// maxInternalReq is the body limit of the internal HTTP requests (a join,
// a removal, a silence check: a few hundred bytes), and maxInternalAnswer
// bounds their answers (a join's lists the members).
const (
	maxCommandBytes   = 64 << 20
	maxBatchFrame     = maxCommandBytes + 64<<10
	maxAnswerFrame    = 512 << 20
	maxInternalReq    = 1 << 20
	maxInternalAnswer = 64 << 20
)

// applyResult is the outcome of one forwarded command: the Response of
// its application, or the error of the attempt.
type applyResult struct {
	Response *fsm.Response `json:"response,omitempty"`
	wireError
}

type indexAnswer struct {
	Index uint64 `json:"index"`
}

type joinAnswer struct {
	Nodes []fsm.NodeInfo `json:"nodes"`
}

type removeRequest struct {
	ID string `json:"id"`
}

// wireError is an error as the node-to-node wire carries it, in an error
// answer or in one command's result.
//
// An outcome of the contract travels as its SPEC code (Code, with
// Message), from which the receiver rebuilds the store error with that
// code (store.Sentinel), so errors.Is works on both nodes alike. Two
// states of one attempt are no such outcome, and travel as State instead:
// stateNotLeader (the node asked does not lead: nothing was applied, ask
// the leader) and stateCommitUnknown (the command was proposed, whether it
// committed is unknown: store.ErrCommitUnknown, which no code names, so it
// can never be read back as a refusal).
type wireError struct {
	Code    store.Code `json:"code,omitempty"`
	State   string     `json:"state,omitempty"`
	Message string     `json:"message,omitempty"`
}

// The states of an attempt.
const (
	stateNotLeader     = "not_leader"
	stateCommitUnknown = "commit_unknown"
)

// wireErrorOf is how err goes on the wire: a state, or its SPEC code (an
// error without one is UNAVAILABLE: nothing was applied).
func wireErrorOf(err error) wireError {
	msg := err.Error()
	switch {
	case errors.Is(err, errNotLeader):
		return wireError{State: stateNotLeader, Message: msg}
	case errors.Is(err, store.ErrCommitUnknown):
		return wireError{State: stateCommitUnknown, Message: msg}
	}
	code := store.CodeOf(err)
	if code == "" {
		code = store.CodeUnavailable
	}
	return codedWireError(code, msg)
}

// codedWireError is an outcome of the contract.
func codedWireError(code store.Code, msg string) wireError {
	return wireError{Code: code, Message: msg}
}

// isError reports whether w carries an error at all.
func (w wireError) isError() bool { return w.Code != "" || w.State != "" }

// err rebuilds the error w carries (nil when none): errNotLeader, an
// error that matches store.ErrCommitUnknown and nothing else, or the store
// error of its code. A code no store error carries (a newer build's)
// keeps its code, so the API still answers with it.
func (w wireError) err() error {
	switch {
	case w.State == stateNotLeader:
		return told(errNotLeader, w.Message)
	case w.State == stateCommitUnknown:
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

// statusOf is the HTTP status of an error answer.
func statusOf(err error) int {
	switch store.CodeOf(err) {
	case store.CodeInvalidRequest:
		return http.StatusBadRequest
	case store.CodeNotFound:
		return http.StatusNotFound
	}
	return http.StatusServiceUnavailable
}
