package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// The internal endpoints, served under the node's HTTP address. Only
// cluster members may call them: over mutual TLS with node TLS, with the
// cluster key when one is set, and from loopback when neither is.
const (
	pathApply     = "/internal/v1/apply"
	pathReadIndex = "/internal/v1/readindex"
	pathJoin      = "/internal/v1/join"
	pathRemove    = "/internal/v1/remove"
	pathState     = "/internal/v1/state"
	// InternalPrefix is the path prefix the internal handler serves.
	InternalPrefix = "/internal/"
	keyHeader      = "Carmy-Cluster-Key"
	maxInternalReq = 64 << 20
)

// Internal error codes, carried in answers.
const (
	codeNotLeader     = "not_leader"
	codeCommitUnknown = "commit_unknown"
	codeUnavailable   = "unavailable"
	codeInvalid       = "invalid"
	codeConflict      = "conflict"
	codeNotFound      = "not_found"
)

type applyRequest struct {
	Commands []json.RawMessage `json:"commands"`
}

type applyResult struct {
	Response *fsm.Response `json:"response,omitempty"`
	Error    string        `json:"error,omitempty"`
	Message  string        `json:"message,omitempty"`
}

type applyAnswer struct {
	Results []applyResult `json:"results"`
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

type errorAnswer struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// codeOf names an error for the wire.
func codeOf(err error) string {
	switch {
	case errors.Is(err, errNotLeader):
		return codeNotLeader
	case errors.Is(err, store.ErrCommitUnknown):
		return codeCommitUnknown
	case errors.Is(err, store.ErrInvalid):
		return codeInvalid
	case errors.Is(err, store.ErrConflict):
		return codeConflict
	case errors.Is(err, store.ErrNotFound):
		return codeNotFound
	}
	return codeUnavailable
}

// errorOf rebuilds an error from its wire code.
func errorOf(code, msg string) error {
	switch code {
	case codeNotLeader:
		return errNotLeader
	case codeCommitUnknown:
		return fmt.Errorf("%w: %s", store.ErrCommitUnknown, msg)
	case codeInvalid:
		return fmt.Errorf("%w: %s", store.ErrInvalid, msg)
	case codeConflict:
		return fmt.Errorf("%w: %s", store.ErrConflict, msg)
	case codeNotFound:
		return &notFoundError{msg: msg}
	}
	return fmt.Errorf("%w: %s", store.ErrUnavailable, msg)
}

// statusOfInternal is the HTTP status of an error answer.

func statusOfInternal(err error) int {
	switch {
	case errors.Is(err, store.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	}
	return http.StatusServiceUnavailable
}

// notFoundError says that a member does not exist. It matches
// store.ErrNotFound and carries the NOT_FOUND code with its own message.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return e.msg }
func (e *notFoundError) ErrorCode() string    { return store.ErrNotFound.ErrorCode() }
func (e *notFoundError) Is(target error) bool { return target == store.ErrNotFound }
