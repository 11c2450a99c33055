package api

import (
	"context"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// Runtime is what the server calls of the tool runtime, in the runtime's
// own types; *engine.Runtime implements it. Errors carry the error codes of docs/errors.md
// through store.Coded.
type Runtime interface {
	// Call runs a tool (docs/api.md#calling-a-tool-post-v1toolscall).
	Call(ctx context.Context, caller engine.Caller, req engine.Request) (engine.Response, error)
	// Tools lists the registered tools (the MCP endpoint mirrors them).
	Tools() []engine.ToolInfo
	// ToolsFor lists the registered tools caller may call, sorted by
	// name (GET /v1/tools, MCP's tools/list); engine.Runtime's decides
	// which.
	ToolsFor(caller engine.Caller) []engine.ToolInfo
	// ToolsGeneration changes whenever Tools does (engine.Runtime's).
	ToolsGeneration() uint64
	// Execution returns an execution the caller may see, else
	// store.ErrNotFound.
	Execution(ctx context.Context, caller engine.Caller, id string) (store.Record, error)
	// Lookup returns the caller's record of an identity.
	Lookup(ctx context.Context, caller engine.Caller, session, requestID string) (store.Record, error)
	// List returns a page of the records the caller may see that req
	// selects, newest first.
	List(ctx context.Context, caller engine.Caller, req engine.ListRequest) (store.Page, error)
	// Cancel cancels a running execution.
	Cancel(ctx context.Context, caller engine.Caller, id string) (store.Record, error)
	// Decide approves or denies an execution awaiting approval
	// (docs/policy.md#approval-gates); an approval runs the tool on this
	// node and answers its outcome, or the running record with an error
	// matching engine.ErrStillRunning when the wait ends first.
	Decide(ctx context.Context, caller engine.Caller, id string, kind store.DecisionKind, reason string) (store.Record, error)
	// Resolve settles an interrupted execution.
	Resolve(ctx context.Context, caller engine.Caller, id string, res engine.Resolution) (store.Record, error)
	// Ready returns nil when the node can serve calls (docs/api.md#health /readyz).
	Ready(ctx context.Context) error
}
