package mcp

import (
	"context"
	"errors"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/store"
)

// errNoCaller: a request reached a tool without an authenticated caller,
// which authenticate prevents; answered -32603.
var errNoCaller = errors.New("mcp: no authenticated caller")

// callTool runs a tools/call through the runtime, under the identity
// _meta and the token give it, and answers as docs/mcp.md says; the
// runtime decides the allow-list and the tool (Runtime.Call), the
// reconcile tools (reconcile.go) aside, which every caller may call.
//
// The call runs under ctx, which ends when the client goes away before
// the answer (the request's context; through the SDK, at 2026-07-28);
// the runtime does not let that cancel the tool, which runs to its own
// timeout and is recorded, for the next retry to replay — unless the
// protocol version says a closed stream cancels (2026-07-28: detached.go).
// A notifications/cancelled naming the call cancels it (inflight.go),
// also for a while after its client went away; a call serveOwn runs as
// a task or with progress says so in ctx (callMode).
func (h *Handler) callTool(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	info := callInfoOf(ctx)
	if info == nil { // not through observed: cannot happen, but stay safe
		info = &CallInfo{Tool: req.Params.Name, caller: callerOf(req.Extra, h.cfg.Anonymous)}
	}
	caller := info.caller
	if caller == nil {
		info.Code = store.CodeInternal
		return nil, errNoCaller
	}
	if isReconcileTool(req.Params.Name) {
		return h.reconcile(ctx, req, info)
	}
	var header = headerOf(req.Extra)
	call, err := requestOf(req.Params.Name, req.Params.Arguments, req.Params.Meta, header)
	info.RequestID, info.SessionID = call.RequestID, call.SessionID
	if err != nil {
		return answer(err, info)
	}
	if h.cfg.Admit != nil {
		if err := h.cfg.Admit(caller); err != nil {
			return answer(err, info)
		}
	}
	if mode := callModeOf(ctx); mode != nil {
		if mode.task {
			return h.startTask(ctx, caller, call, info, mode)
		}
		call.Progress = mode.progress
	}
	tracked := h.track(ctx, caller, &call, header, protocolVersion(header, req.Params.Meta))
	resp, err := h.cfg.Runtime.Call(ctx, *caller, call)
	tracked.ended(ctx.Err() != nil && errors.Is(err, ctx.Err()))
	if err != nil {
		res, rpcErr := answer(err, info)
		if info.Code == store.CodeInternal {
			h.log.Error("mcp: tools/call failed", slog.String("tool", info.Tool), slog.String("principal", info.Principal), slog.Any("err", err))
		}
		return res, rpcErr
	}
	info.ExecutionID, info.Status, info.Replayed = resp.Record.ExecutionID, string(resp.Record.Status), resp.Replayed
	info.Passthrough = resp.Passthrough
	return resultOf(resp), nil
}

// handOver is the handler of every tool in the SDK's registry: it
// returns the result the middleware had the runtime make (CallInfo's
// ran), so that the SDK finishes it as a result of its own tools.
// Reached by any other way, it answers -32603.
func (h *Handler) handOver(ctx context.Context, _ *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	if info := callInfoOf(ctx); info != nil && info.ran != nil {
		return info.ran, nil
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
}

// methodCallTool is the method of a tool call.
const methodCallTool = "tools/call"

// runTool is the SDK's Server.callTool after middleware ran the call:
// the tool handler's result (handOver), never "null" content. The fast
// path (fastpath.Config.Tool), tasks and progress run it under
// middleware as the SDK would.
func (h *Handler) runTool(ctx context.Context, _ string, req sdk.Request) (sdk.Result, error) {
	res, err := h.handOver(ctx, req.(*sdk.CallToolRequest))
	if err != nil {
		return nil, err
	}
	if res.Content == nil {
		res.Content = []sdk.Content{} // as the SDK does: never "null"
	}
	return res, nil
}
