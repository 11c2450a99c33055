package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// The reconcile tools (docs/mcp.md, "Reconciling from the model"): every principal's tools/list holds
// them, whatever its allow-list, so that a model told EXECUTION_UNCERTAIN
// can find out what happened and settle it with the tools it already
// knows how to call. They act on the caller's own executions only (the
// runtime scopes Lookup, Cancel and Resolve to the caller, and to the
// tools it may call), run nothing and are not recorded: calling them
// again is safe.
const (
	ToolLookup  = "carmy.lookup"
	ToolCancel  = "carmy.cancel"
	ToolResolve = "carmy.resolve"
)

// reconcileTools are the reserved tools as tools/list shows them.
var reconcileTools = []*sdk.Tool{
	{
		Name: ToolLookup,
		Description: "Look up what became of an earlier call of yours, by the carmy/request_id (and carmy/session_id) it was sent with: " +
			"its execution_id, its status (running, interrupted, completed, failed, timed_out, cancelled) and its result. " +
			"Use it after EXECUTION_UNCERTAIN or a lost answer instead of calling the tool again.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"request_id":{"type":"string","description":"the carmy/request_id of the call"},` +
			`"session_id":{"type":"string","description":"its carmy/session_id; default: this request's session"}},` +
			`"required":["request_id"],"additionalProperties":false}`),
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)},
	},
	{
		Name: ToolCancel,
		Description: "Cancel a running execution of yours by its execution_id: cancelled is recorded at once, the tool is stopped " +
			"on whichever node runs it, and whatever it returns afterwards is discarded. Answers the execution as it now stands.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"execution_id":{"type":"string","description":"the execution to cancel"}},` +
			`"required":["execution_id"],"additionalProperties":false}`),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: new(bool), IdempotentHint: true, OpenWorldHint: new(bool)},
	},
	{
		Name: ToolResolve,
		Description: "Settle an interrupted execution of yours (its node died or its answer was lost) once you have established " +
			"what happened, for example by reading the system it acted on: status completed with data, failed with " +
			"error {code, message}, or released to let the next call with the same request_id run the tool again.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"execution_id":{"type":"string","description":"the interrupted execution"},` +
			`"status":{"type":"string","enum":["completed","failed","released"]},` +
			`"data":{"description":"the outcome, for completed"},` +
			`"error":{"type":"object","properties":{"code":{"type":"string"},"message":{"type":"string"}},"required":["code","message"],"description":"the failure, for failed"}},` +
			`"required":["execution_id","status"],"additionalProperties":false}`),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: new(bool), IdempotentHint: true, OpenWorldHint: new(bool)},
	},
}

// isReconcileTool reports whether name is one of the reconcile tools.
func isReconcileTool(name string) bool {
	return name == ToolLookup || name == ToolCancel || name == ToolResolve
}

// reconcileArgs are the arguments of the reconcile tools.
type reconcileArgs struct {
	RequestID   *string         `json:"request_id"`
	SessionID   *string         `json:"session_id"`
	ExecutionID *string         `json:"execution_id"`
	Status      string          `json:"status"`
	Data        json.RawMessage `json:"data"`
	Error       json.RawMessage `json:"error"`
}

// reconcile serves a call of a reconcile tool for info's caller: the
// execution as it stands, or a refusal (isError) with the
// envelope of docs/errors.md (NOT_FOUND, INVALID_STATE, INVALID_REQUEST, UNAVAILABLE, …).
func (h *Handler) reconcile(ctx context.Context, req *sdk.CallToolRequest, info *CallInfo) (*sdk.CallToolResult, error) {
	caller := info.caller
	var args reconcileArgs
	if name := req.Params.Name; name == ToolCancel || name == ToolResolve {
		// Every cancel and resolution is audited, refusals included.
		defer func() {
			action := engine.ActionCancel
			switch {
			case name == ToolResolve && args.Status == engine.ResolutionReleased:
				action = engine.ActionRelease
			case name == ToolResolve:
				action = engine.ActionResolve
			}
			target := ""
			if args.ExecutionID != nil {
				target = *args.ExecutionID
			}
			h.audit(ctx, action, caller.Principal, target, info.Code)
		}()
	}
	raw := engine.NullIsAbsent(req.Params.Arguments)
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&args); err != nil {
			return refusal(invalidField("arguments", fmt.Sprintf("the arguments of %s: %v", req.Params.Name, err)), info), nil
		}
	}
	if h.cfg.Admit != nil {
		if err := h.cfg.Admit(caller); err != nil {
			return answer(err, info)
		}
	}
	var (
		rec      store.Record
		err      error
		released bool // a release: rec is the record it removed
	)
	switch req.Params.Name {
	case ToolLookup:
		if args.RequestID == nil {
			return refusal(invalidField("request_id", ToolLookup+" needs request_id"), info), nil
		}
		info.RequestID = *args.RequestID
		session := ""
		if args.SessionID != nil {
			session = *args.SessionID
		} else if call, cerr := requestOf(req.Params.Name, nil, req.Params.Meta, headerOf(req.Extra)); cerr == nil {
			session = call.SessionID
		}
		info.SessionID = session
		rec, err = h.cfg.Runtime.Lookup(ctx, *caller, session, *args.RequestID)
	case ToolCancel, ToolResolve:
		if args.ExecutionID == nil || *args.ExecutionID == "" {
			return refusal(invalidField("execution_id", req.Params.Name+" needs execution_id"), info), nil
		}
		if req.Params.Name == ToolCancel {
			rec, err = h.cfg.Runtime.Cancel(ctx, *caller, *args.ExecutionID)
		} else {
			rec, err = h.cfg.Runtime.Resolve(ctx, *caller, *args.ExecutionID, engine.Resolution{Status: args.Status, Data: args.Data, Error: args.Error})
			released = args.Status == engine.ResolutionReleased
		}
	}
	if err != nil {
		code := store.CodeOf(err)
		if code == store.CodeInternal && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			h.log.Error("mcp: a reconcile tool failed", slog.String("tool", req.Params.Name), slog.String("principal", info.Principal), slog.Any("err", err))
			return answer(err, info)
		}
		if code == store.CodeInternal {
			return answer(err, info)
		}
		return refusal(err, info), nil
	}
	info.ExecutionID, info.Status = rec.ExecutionID, string(rec.Status)
	body, mErr := json.Marshal(h.recordView(rec, released))
	if mErr != nil {
		return answer(mErr, info)
	}
	return &sdk.CallToolResult{
		Meta:              sdk.Meta{MetaExecutionID: rec.ExecutionID, MetaStatus: string(rec.Status)},
		Content:           textOf(body),
		StructuredContent: json.RawMessage(body),
	}, nil
}

// recordView is Config.RecordView, or recordJSON.
func (h *Handler) recordView(rec store.Record, released bool) any {
	if h.cfg.RecordView != nil {
		return h.cfg.RecordView(rec, released)
	}
	return recordJSON(rec, released)
}

// recordJSON is an execution as GET /v1/executions shows it (and, for
// the record a release removed, "released": true), for a handler whose
// Config names no RecordView.
func recordJSON(rec store.Record, released bool) map[string]any {
	const timeFormat = "2006-01-02T15:04:05.000Z07:00"
	out := map[string]any{
		"execution_id": rec.ExecutionID, "session_id": rec.Key.Session, "tool": rec.Tool,
		"status": rec.Status, "started_at": rec.StartedAt.UTC().Format(timeFormat),
		"resolved": rec.Resolved, "fingerprint": rec.Fingerprint, "node_id": rec.NodeID, "principal": rec.Key.Principal,
	}
	if rec.Key.RequestID != "" {
		out["request_id"] = rec.Key.RequestID
	}
	if rec.Status == store.StatusCompleted {
		data := rec.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		out["data"] = data
	}
	if len(rec.Error) > 0 {
		out["error"] = rec.Error
	}
	if !rec.FinishedAt.IsZero() {
		out["finished_at"] = rec.FinishedAt.UTC().Format(timeFormat)
	}
	if released {
		out["released"] = true
	}
	return out
}

// uncertainAdvice is what the text of an EXECUTION_UNCERTAIN refusal
// tells the model, after what happened (docs/mcp.md, "Reconciling from the model").
func uncertainAdvice(status store.Status, executionID string) string {
	what := "it is still running"
	if status == store.StatusInterrupted {
		what = "its outcome is unknown (the node running it stopped, or its answer was lost) until it is reconciled"
	}
	return fmt.Sprintf("This call was already made and %s. Do not repeat it under a new carmy/request_id: that could perform the action twice. "+
		"Wait and retry with the same carmy/request_id to get the recorded result, or reconcile it: %s {\"request_id\": …} shows its state, "+
		"%s {\"execution_id\": %q} stops it while running, and %s {\"execution_id\": %q, \"status\": \"completed\"|\"failed\"|\"released\"} "+
		"settles it once you know what happened.", what, ToolLookup, ToolCancel, executionID, ToolResolve, executionID)
}
