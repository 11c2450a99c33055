package peer

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/carmyhq/carmy/store"
)

// WriteJSON answers with status and v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers with status and what went wrong (an Error,
// which the calling Client rebuilds as the same error).
func WriteError(w http.ResponseWriter, status int, we Error) {
	WriteJSON(w, status, we)
}

// StatusOf is the HTTP status of an error answer of a join or a removal:
// 400, 404 and 409 for the codes that say so, 503 for everything else.
func StatusOf(err error) int {
	switch store.CodeOf(err) {
	case store.CodeInvalidRequest:
		return http.StatusBadRequest
	case store.CodeNotFound:
		return http.StatusNotFound
	case store.CodeInvalidState:
		return http.StatusConflict
	}
	return http.StatusServiceUnavailable
}

// errorAnswer is the error an error answer (status, body raw) of addr
// carries (Error.Err); one that carries none is store.ErrUnavailable,
// and a refusal of this node as a member also matches ErrRefused.
func errorAnswer(addr, status string, raw []byte) error {
	var we Error
	if json.Unmarshal(raw, &we) != nil || !we.IsError() {
		return fmt.Errorf("%w: %s answered %s", store.ErrUnavailable, addr, status)
	}
	if we.Code == store.CodeForbidden {
		return fmt.Errorf("%w: %s refused this node: %s (%w)", store.ErrUnavailable, addr, we.Message, ErrRefused)
	}
	return we.Err()
}
