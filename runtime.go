package carmy

import (
	"context"

	"github.com/carmyhq/carmy/store"
)

// The methods of a Runtime a library user calls; each is the engine
// runtime's (engine.Runtime), which documents its contract.

// Tool registers a tool under name. A problem (a duplicate name, an
// invalid schema) is returned by Err, and by Serve.
func (r *Runtime) Tool(name string, fn ToolFunc, opts ...ToolOption) { r.rt.Tool(name, fn, opts...) }

// AddTool registers a tool and reports any problem at once.
func (r *Runtime) AddTool(spec ToolSpec) error { return r.rt.AddTool(spec) }

// AddDemoTools registers the demo tools of docs/cli.md#--dev.
func (r *Runtime) AddDemoTools() error { return r.rt.AddDemoTools() }

// IdempotencyStore replaces the backend: the store and what it knows
// beside (Backend). Call it before the first call. A *store.Memory and a
// *postgres.Store are backends; wrap any other store.Store in Basic.
func (r *Runtime) IdempotencyStore(b Backend) { r.rt.IdempotencyStore(b) }

// Err returns the problems found while setting the runtime up, joined.
func (r *Runtime) Err() error { return r.rt.Err() }

// Store returns the runtime's backend.
func (r *Runtime) Store() Backend { return r.rt.Store() }

// Config returns the runtime's configuration.
func (r *Runtime) Config() Config { return r.rt.Config() }

// Tools returns the registered tools, sorted by name.
func (r *Runtime) Tools() []ToolInfo { return r.rt.Tools() }

// ToolsFor returns the registered tools caller may call, sorted by name
// (engine.Runtime.ToolsFor: what GET /v1/tools and MCP's tools/list show
// caller).
func (r *Runtime) ToolsFor(caller Caller) []ToolInfo { return r.rt.ToolsFor(caller) }

// Call runs one call of a tool for caller: validate, reserve, run,
// record; a retry of a recorded identity is replayed
// (engine.Runtime.Call documents every answer).
func (r *Runtime) Call(ctx context.Context, caller Caller, req Request) (Response, error) {
	return r.rt.Call(ctx, caller, req)
}

// Lookup returns the record of an identity; the principal is the
// caller's.
func (r *Runtime) Lookup(ctx context.Context, caller Caller, session, requestID string) (store.Record, error) {
	return r.rt.Lookup(ctx, caller, session, requestID)
}

// Execution returns the record of an execution the caller may see.
func (r *Runtime) Execution(ctx context.Context, caller Caller, id string) (store.Record, error) {
	return r.rt.Execution(ctx, caller, id)
}

// List returns a page of the executions the caller may see.
func (r *Runtime) List(ctx context.Context, caller Caller, req ListRequest) (store.Page, error) {
	return r.rt.List(ctx, caller, req)
}

// Cancel records cancelled for a running execution the caller may see
// and cancels its tool.
func (r *Runtime) Cancel(ctx context.Context, caller Caller, id string) (store.Record, error) {
	return r.rt.Cancel(ctx, caller, id)
}

// Resolve settles an interrupted execution the caller may see.
func (r *Runtime) Resolve(ctx context.Context, caller Caller, id string, res Resolution) (store.Record, error) {
	return r.rt.Resolve(ctx, caller, id, res)
}

// Approve approves an execution awaiting approval (docs/policy.md#approval-gates):
// caller must be one of its tool's approvers or the admin, never the
// execution's own principal. The tool then runs on this node; the answer
// is its outcome, or the running record and ctx's error when ctx ends
// first. An execution not awaiting approval is a *store.StateError
// carrying the record as it stands.
func (r *Runtime) Approve(ctx context.Context, caller Caller, id, reason string) (store.Record, error) {
	return r.rt.Decide(ctx, caller, id, store.DecisionApprove, reason)
}

// Deny records denied for an execution awaiting approval, under the
// rules of Approve; the tool never runs.
func (r *Runtime) Deny(ctx context.Context, caller Caller, id, reason string) (store.Record, error) {
	return r.rt.Decide(ctx, caller, id, store.DecisionDeny, reason)
}

// Ready returns nil when the runtime can serve calls: it is neither
// shutting down nor starting, and its backend is ready.
func (r *Runtime) Ready(ctx context.Context) error { return r.rt.Ready(ctx) }

// Running returns how many tools run on this node now.
func (r *Runtime) Running() int { return r.rt.Running() }

// Shutdown stops taking calls, waits up to the drain timeout (or ctx) for
// running tools, then cancels those still running and waits for their
// outcomes to be recorded while ctx allows.
func (r *Runtime) Shutdown(ctx context.Context) error { return r.rt.Shutdown(ctx) }

// SetToolGroup replaces the tools of the group prefix (each named
// prefix.<name>) with specs and makes the group available: how an
// upstream MCP server's tools are registered (mcpgateway.Registry).
func (r *Runtime) SetToolGroup(prefix string, specs []ToolSpec) error {
	return r.rt.SetToolGroup(prefix, specs)
}

// SetToolGroupUnavailable makes the group prefix unavailable until the
// next SetToolGroup: a call that would run one of its tools answers err
// (an UNAVAILABLE error) before anything is reserved (mcpgateway.Registry).
func (r *Runtime) SetToolGroupUnavailable(prefix string, err error) error {
	return r.rt.SetToolGroupUnavailable(prefix, err)
}
