package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Resolution kinds (Resolution.Status).
const (
	ResolveCompleted = "completed"
	ResolveFailed    = "failed"
	ResolveReleased  = "released"
)

// Resolution is the outcome a caller established for an execution whose
// runner is gone (docs/api.md#reconciling-cancel-and-resolve), built with Completed, Failed or Released.
type Resolution struct {
	// Status is ResolveCompleted, ResolveFailed or ResolveReleased.
	Status string
	// Data is a completed outcome's data: a json.RawMessage or []byte of
	// JSON, or any value to marshal; nil records JSON null.
	Data any
	// Code and Message are a failed outcome's error.
	Code, Message string
}

// Completed records that the tool did complete, with data as its result.
func Completed(data any) Resolution { return Resolution{Status: ResolveCompleted, Data: data} }

// Failed records that the tool failed, with this error code and message.
func Failed(code, message string) Resolution {
	return Resolution{Status: ResolveFailed, Code: code, Message: message}
}

// Released removes the reservation: the tool had no effect (or its effect
// is undone), and the next call of the identity runs it again.
func Released() Resolution { return Resolution{Status: ResolveReleased} }

// resolveBody is the JSON of POST /v1/executions/{id}/resolve.
type resolveBody struct {
	Status string          `json:"status"`
	Data   json.RawMessage `json:"data,omitempty"`
	Error  *resolveError   `json:"error,omitempty"`
}

type resolveError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

func (r Resolution) body() (*resolveBody, error) {
	b := &resolveBody{Status: r.Status}
	switch r.Status {
	case ResolveCompleted:
		data, err := encodeJSON("data", r.Data)
		if err != nil {
			return nil, err
		}
		if data == nil {
			data = json.RawMessage("null")
		}
		b.Data = data
	case ResolveFailed:
		if r.Code == "" {
			return nil, usage("a failed resolution needs an error code")
		}
		b.Error = &resolveError{Code: r.Code, Message: r.Message}
	case ResolveReleased:
	default:
		return nil, usage("resolution status %q: want completed, failed or released", r.Status)
	}
	if r.Status != ResolveCompleted && r.Data != nil {
		return nil, usage("a %s resolution takes no data", r.Status)
	}
	if r.Status != ResolveFailed && (r.Code != "" || r.Message != "") {
		return nil, usage("a %s resolution takes no error", r.Status)
	}
	return b, nil
}

// Resolve settles an execution whose runner is gone: an interrupted one,
// or a running one whose node the cluster declared dead (POST
// /v1/executions/{id}/resolve). Completed and Failed record the outcome,
// replayed from then on with Resolved set; Released removes the
// reservation (the answer has Released set) so that the next call runs
// the tool. It returns the record as it now stands. An execution in
// another state is ErrInvalidState, with its status in APIError.ExecStatus.
//
// Resolve is retried like a read: the node applies it only to an
// unsettled execution, so a retry of a resolve that took effect answers
// ErrInvalidState (or, after a release, ErrNotFound) rather than act twice.
func (c *Client) Resolve(ctx context.Context, executionID string, r Resolution) (*Execution, error) {
	path, err := executionPath(executionID, "/resolve")
	if err != nil {
		return nil, err
	}
	b, err := r.body()
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("carmy: encoding the resolution: %w", err)
	}
	return c.execution(ctx, &request{method: http.MethodPost, path: path, body: raw, idempotent: true})
}
