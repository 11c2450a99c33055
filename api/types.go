package api

import (
	"context"
	"encoding/json"
	"time"

	"github.com/carmyhq/carmy/store"
)

// Caller is who makes a call, as authentication established it.
type Caller struct {
	Principal string
	// Admin sees and reconciles every principal's executions, and may
	// administer the cluster.
	Admin bool
	// MaxEntries is the most records this principal may hold cluster-wide:
	// a call of a new identity once it holds that many is refused with
	// IDEMPOTENCY_CAPACITY (a *store.QuotaError). 0 means no per-principal
	// bound (the store's capacity still applies).
	MaxEntries int
}

// Request is one call of a tool.
type Request struct {
	Tool string
	// Arguments must be a JSON object; empty means {}.
	Arguments json.RawMessage
	// RequestID, when set, makes the call idempotent.
	RequestID string
	SessionID string
	// Metadata must be a JSON object; empty means {}. It is part of the
	// fingerprint.
	Metadata json.RawMessage
	// Timeout, when positive, lowers the tool's timeout.
	Timeout time.Duration
}

// Response is the answer to a call: the execution's record and whether it
// is a replay of an earlier execution.
type Response struct {
	Record   store.Record
	Replayed bool
}

// ToolInfo describes a registered tool.
type ToolInfo struct {
	Name        string
	Description string
	InputSchema json.RawMessage
	Timeout     time.Duration
}

// Resolution is an outcome a caller established for an interrupted
// execution (SPEC §2.5).
type Resolution struct {
	// Status is "completed", "failed" or "released".
	Status string
	Data   json.RawMessage
	// Error is the failed outcome's error object, with "code" and "message".
	Error json.RawMessage
}

// Runtime is what the server needs of Carmy's runtime. Errors carry SPEC
// §2.2 codes through store.Coded.
type Runtime interface {
	// Call runs a tool (SPEC §2.1).
	Call(ctx context.Context, caller Caller, req Request) (Response, error)
	// Tools lists the registered tools.
	Tools() []ToolInfo
	// Execution returns an execution the caller may see, else
	// store.ErrNotFound.
	Execution(ctx context.Context, caller Caller, id string) (store.Record, error)
	// Lookup returns the caller's record of an identity.
	Lookup(ctx context.Context, caller Caller, session, requestID string) (store.Record, error)
	// List returns the caller's records in a session, newest first.
	List(ctx context.Context, caller Caller, session string, limit int, before uint64) (store.Page, error)
	// Cancel cancels a running execution.
	Cancel(ctx context.Context, caller Caller, id string) (store.Record, error)
	// Resolve settles an interrupted execution.
	Resolve(ctx context.Context, caller Caller, id string, res Resolution) (store.Record, error)
	// Ready returns nil when the node can serve calls (SPEC §2.7 /readyz).
	Ready(ctx context.Context) error
}
