package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/jsonscan"
	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/store"
)

// MCP tasks (docs/mcp.md#long-calls-tasks). A task is an execution record: its id is the
// execution_id, so it is durable, answered by every node, and outlives
// the node that started it. Carmy serves both forms:
//
//   - 2025-11-25 (core): a tools/call with params.task is answered, once
//     its reservation has committed and its tool's request has left the
//     node (startTask), with {"task": …};
//     tasks/get answers the task, tasks/result waits for its end and
//     answers the tool's result, tasks/list the caller's tasks, newest
//     first, a page at a time, and tasks/cancel cancels it;
//   - 2026-07-28 (the io.modelcontextprotocol/tasks extension): a
//     tools/call from a client that declares the extension is answered
//     with a task (resultType "task"); tasks/get answers the task with
//     its result inline once it has one; tasks/cancel and tasks/update
//     are acknowledged; there is no tasks/list.
//
// Statuses: running is working; interrupted is working too, with a
// statusMessage saying that the outcome is being reconciled; cancelled is
// cancelled; completed is completed. failed and timed_out are failed at
// 2025-11-25, with the result of docs/mcp.md (isError); at 2026-07-28 the
// extension keeps failed for JSON-RPC errors, so they are completed with
// that same isError result. awaiting_approval is input_required at both
// (with an empty inputRequests at 2026-07-28: the input is a person's
// decision, not the client's), its statusMessage naming the execution and
// how to decide (taskapproval.go); denied and expired end as failed does.

// TaskPollInterval is the polling interval a task suggests.
const TaskPollInterval = time.Second

// taskWaitMax bounds one wait of tasks/result between two reads of the
// record.
const taskWaitMax = time.Second

// CodeMissingCapability is the JSON-RPC error of a task method at
// 2026-07-28 from a client that does not declare the tasks extension.
const CodeMissingCapability = -32021

// task is a task's JSON at either version (the names of ttl and
// pollInterval differ), with what tasks/get inlines at 2026-07-28.
type task struct {
	ResultType     string          `json:"resultType,omitempty"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTL            *int64          `json:"ttl,omitempty"`
	PollInterval   int64           `json:"pollInterval,omitempty"`
	TTLMs          *int64          `json:"ttlMs,omitempty"`
	PollIntervalMs int64           `json:"pollIntervalMs,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	// InputRequests is the extension's field of an input_required task:
	// {} for a task awaiting approval (nothing the client can answer).
	InputRequests json.RawMessage `json:"inputRequests,omitempty"`
	Meta          map[string]any  `json:"_meta,omitempty"`
}

// MarshalJSON writes ttl (or ttlMs) as null: a record is kept until the
// operator's retention removes it, so a task has no TTL.
func (t task) MarshalJSON() ([]byte, error) {
	type plain task
	raw, err := json.Marshal(plain(t))
	if err != nil {
		return nil, err
	}
	field := `"ttl":null`
	if t.PollIntervalMs != 0 {
		field = `"ttlMs":null`
	}
	return append(append(raw[:len(raw)-1:len(raw)-1], ','), append([]byte(field), '}')...), nil
}

// taskOf is rec as a task at version.
func taskOf(rec store.Record, version string) task {
	const timeFormat = "2006-01-02T15:04:05.000Z07:00"
	t := task{TaskID: rec.ExecutionID, CreatedAt: rec.StartedAt.UTC().Format(timeFormat)}
	t.LastUpdatedAt = t.CreatedAt
	if !rec.FinishedAt.IsZero() {
		t.LastUpdatedAt = rec.FinishedAt.UTC().Format(timeFormat)
	}
	modern := mcpversion.For(version).TasksExtension
	if modern {
		t.PollIntervalMs = TaskPollInterval.Milliseconds()
	} else {
		t.PollInterval = TaskPollInterval.Milliseconds()
	}
	switch rec.Status {
	case store.StatusRunning:
		t.Status = "working"
	case store.StatusInterrupted:
		t.Status = "working"
		t.StatusMessage = "interrupted: the node running it stopped or its answer was lost, so whether it took effect is unknown; " +
			"the outcome is being reconciled (" + ToolLookup + ", " + ToolResolve + ")"
	case store.StatusCompleted:
		t.Status = "completed"
	case store.StatusCancelled:
		t.Status = "cancelled"
		t.StatusMessage = errorMessage(rec.Error)
	case store.StatusAwaitingApproval:
		t.Status = "input_required"
		t.StatusMessage = awaitingMessage(rec)
		if modern {
			t.InputRequests = json.RawMessage("{}")
		}
	default: // failed, timed_out, denied, expired
		t.Status = "failed"
		if modern {
			t.Status = "completed" // a result with isError (see above)
		}
		t.StatusMessage = errorMessage(rec.Error)
	}
	if modern && t.Status == "completed" {
		if raw, err := jsonscan.MarshalNoHTML(resultOf(engine.Response{Record: rec})); err == nil {
			t.Result = raw
		}
	}
	return t
}

// errorMessage is the message of a recorded error object.
func errorMessage(raw json.RawMessage) string {
	var e store.ErrorBody
	_ = json.Unmarshal(raw, &e)
	return e.Message
}

// serveTaskCall answers a tools/call that asks for a task: the task once
// the reservation has committed and the tool's request has left the node
// (or the task of the identity's record, when the call is a retry of
// it), else the result or the refusal a plain call would have had
// (startTask). From 2026-07-28 on, a call answered with a result rather
// than a task (a retry of a finished call, a refusal, a reconcile tool)
// is finished as the SDK finishes any tools/call's result
// (fastpath.Server.NewProtocolResult).
func (h *Handler) serveTaskCall(w http.ResponseWriter, r *http.Request, msg ownMessage, p ownParams, version string) {
	mode := &callMode{task: true}
	ctx := withCallMode(r.Context(), mode)
	res, err := h.middleware(h.runTool)(ctx, methodCallTool, callRequest(r, p))
	modern := mcpversion.For(version).TasksExtension
	cr, _ := res.(*sdk.CallToolResult)
	switch {
	case err != nil:
		writeErrorResult(w, msg.ID, err)
	case mode.rec != nil && (!modern || cr == nil || !mode.rec.Status.Finished()):
		t := taskOf(*mode.rec, version)
		if modern {
			t.ResultType, t.Result = "task", nil
			writeResult(w, msg.ID, t)
			return
		}
		writeResult(w, msg.ID, struct {
			Task task `json:"task"`
		}{t})
	case modern:
		// A result, no task: a retry of a finished call, a refusal, a
		// reconcile tool's answer. Finished as the SDK finishes a
		// tools/call's at this version (serverInfo, resultType), as
		// when the client does not declare the extension.
		raw, ferr := h.fast.NewProtocolResult(res, true)
		if ferr != nil {
			writeErrorResult(w, msg.ID, ferr)
			return
		}
		writeResult(w, msg.ID, raw)
	default:
		writeResult(w, msg.ID, res)
	}
}

// taskSentWait bounds how long a task call waits, once reserved, for its
// tool's request to leave the node before it is answered with its task
// all the same (an upstream whose connection neither opens nor fails).
const taskSentWait = 5 * time.Second

// startTask runs call as a task (callTool, for a mode.task call). It
// returns with mode.rec set and no result once the reservation has
// committed and the tool's request has left this node
// (engine.Request.OnSent; or taskSentWait after the reservation), while
// the tool runs on. It returns the result the call would have had, as a
// plain call's, when the runtime answers first: a replay or a retry of a
// running or interrupted identity (mode.rec set to its record), a run
// that ended before its request was known to have left (its record, or
// the refusal of a request never sent: UNAVAILABLE, nothing recorded),
// or any refusal. A task is thus never answered for an execution that
// is then released unrecorded.
func (h *Handler) startTask(ctx context.Context, caller *engine.Caller, call engine.Request, info *CallInfo, mode *callMode) (*sdk.CallToolResult, error) {
	call.Task = true
	reserved := make(chan store.Record, 1)
	call.OnReserved = func(rec store.Record) { reserved <- rec }
	sent := make(chan struct{})
	call.OnSent = func() { close(sent) } // at most once
	type answered struct {
		resp engine.Response
		err  error
	}
	done := make(chan answered, 1)
	go func() {
		// The tool runs to its own end whatever becomes of this request.
		resp, err := h.cfg.Runtime.Call(context.WithoutCancel(ctx), *caller, call)
		done <- answered{resp, err}
	}()
	ended := func(a answered) (*sdk.CallToolResult, error) {
		if a.err == nil {
			mode.rec = &a.resp.Record
			info.ExecutionID, info.Status, info.Replayed = a.resp.Record.ExecutionID, string(a.resp.Record.Status), a.resp.Replayed
			return resultOf(a.resp), nil
		}
		var ue *store.UncertainError
		if errors.As(a.err, &ue) {
			mode.rec = &ue.Record
		}
		return answer(a.err, info)
	}
	var rec store.Record
	select {
	case rec = <-reserved:
	case a := <-done:
		return ended(a)
	case <-ctx.Done():
		return answer(ctx.Err(), info)
	}
	bound := time.NewTimer(taskSentWait)
	defer bound.Stop()
	select {
	case <-sent:
	case <-bound.C:
	case a := <-done:
		return ended(a)
	case <-ctx.Done():
		return answer(ctx.Err(), info)
	}
	mode.rec = &rec
	info.ExecutionID, info.Status, info.RequestID = rec.ExecutionID, string(rec.Status), rec.Key.RequestID
	return nil, nil
}

// serveTaskMethod answers tasks/get, tasks/result, tasks/list,
// tasks/cancel and tasks/update for the caller of r.
func (h *Handler) serveTaskMethod(w http.ResponseWriter, r *http.Request, msg ownMessage, p ownParams, version string) {
	caller := callerOfRequest(r, h.cfg.Anonymous)
	if caller == nil {
		writeRPCError(w, http.StatusOK, msg.ID, jsonrpc.CodeInternalError, "internal error", nil)
		return
	}
	modern := mcpversion.For(version).TasksExtension
	if modern && !wantsTask(p, version) {
		writeRPCError(w, http.StatusOK, msg.ID, CodeMissingCapability, "Missing required client capability: "+extensionTasks,
			map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extensionTasks: map[string]any{}}}})
		return
	}
	ctx := r.Context()
	if msg.Method == "tasks/list" {
		h.listTasks(w, r, msg, p, *caller, version)
		return
	}
	if p.TaskID == nil || *p.TaskID == "" {
		writeRPCError(w, http.StatusOK, msg.ID, jsonrpc.CodeInvalidParams, msg.Method+": params.taskId is required", nil)
		return
	}
	id := *p.TaskID
	var (
		rec store.Record
		err error
	)
	switch msg.Method {
	case "tasks/cancel":
		rec, err = h.cfg.Runtime.Cancel(ctx, *caller, id)
		h.audit(ctx, engine.ActionCancel, caller.Principal, id, auditCode(err))
		if errors.Is(err, store.ErrInvalidState) {
			// Finished already, or interrupted (which resolve settles):
			// the task as it stands.
			rec, err = h.cfg.Runtime.Execution(ctx, *caller, id)
			if err == nil && !modern {
				writeRPCError(w, http.StatusOK, msg.ID, jsonrpc.CodeInvalidParams,
					fmt.Sprintf("task %s is %s and cannot be cancelled", id, rec.Status), nil)
				return
			}
		}
	case "tasks/result":
		rec, err = h.awaitFinished(ctx, *caller, id)
	default:
		rec, err = h.cfg.Runtime.Execution(ctx, *caller, id)
	}
	if err != nil {
		h.taskError(w, msg.ID, id, err)
		return
	}
	switch {
	case modern && (msg.Method == "tasks/cancel" || msg.Method == "tasks/update"):
		writeResult(w, msg.ID, map[string]string{"resultType": "complete"})
	case msg.Method == "tasks/result":
		res := resultOf(engine.Response{Record: rec})
		res.Meta[metaRelatedTask] = map[string]any{"taskId": rec.ExecutionID}
		writeResult(w, msg.ID, res)
	default:
		t := taskOf(rec, version)
		if modern {
			t.ResultType = "complete"
		}
		writeResult(w, msg.ID, t)
	}
}

// taskError answers a task method whose execution could not be read.
func (h *Handler) taskError(w http.ResponseWriter, id json.RawMessage, taskID string, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeRPCError(w, http.StatusOK, id, jsonrpc.CodeInvalidParams, fmt.Sprintf("task %q not found", taskID), nil)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		writeRPCError(w, http.StatusOK, id, jsonrpc.CodeInternalError, "the request ended before an answer", nil)
	default:
		code := store.CodeOf(err)
		if code == store.CodeInternal {
			h.log.Error("mcp: a task method failed", "task", taskID, "err", err)
			writeRPCError(w, http.StatusOK, id, jsonrpc.CodeInternalError, "internal error", nil)
			return
		}
		writeRPCError(w, http.StatusOK, id, jsonrpc.CodeInternalError, err.Error(), envelope(code, nil, err.Error()))
	}
}

// awaitFinished reads the execution until it has finished, or ctx ends:
// the wait of tasks/result. It reads the record through the store (any
// node's, linearizable), more rarely as it waits longer.
func (h *Handler) awaitFinished(ctx context.Context, caller engine.Caller, id string) (store.Record, error) {
	wait := 20 * time.Millisecond
	for {
		rec, err := h.cfg.Runtime.Execution(ctx, caller, id)
		if err != nil || rec.Status.Finished() {
			return rec, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return store.Record{}, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, taskWaitMax)
	}
}

// TaskListLimit is the size of a page of tasks/list.
const TaskListLimit = 50

// listTasks answers tasks/list: the caller's own executions, in every
// session, newest first, TaskListLimit a page; nextCursor names the next
// (taskcursor.go), and a cursor that is not one it gave is -32602.
func (h *Handler) listTasks(w http.ResponseWriter, r *http.Request, msg ownMessage, p ownParams, caller engine.Caller, version string) {
	req := engine.ListRequest{AllSessions: true, Principal: caller.Principal, Limit: TaskListLimit}
	if p.Cursor != nil {
		before, err := decodeTaskCursor(r.Context(), h.cfg.Runtime, caller, *p.Cursor)
		if errors.Is(err, errBadCursor) {
			writeRPCError(w, http.StatusOK, msg.ID, jsonrpc.CodeInvalidParams, err.Error(), nil)
			return
		}
		if err != nil {
			h.taskError(w, msg.ID, "", err)
			return
		}
		req.Before = before
	}
	page, err := h.cfg.Runtime.List(r.Context(), caller, req)
	// A page whose every record was of a tool outside the caller's
	// allow-list (engine.Runtime.List drops them) has no task to name
	// in a cursor: the next is read instead.
	for err == nil && len(page.Records) == 0 && page.Next != 0 {
		req.Before = page.Next
		page, err = h.cfg.Runtime.List(r.Context(), caller, req)
	}
	if err != nil {
		h.taskError(w, msg.ID, "", err)
		return
	}
	out := struct {
		Tasks      []task `json:"tasks"`
		NextCursor string `json:"nextCursor,omitempty"`
	}{Tasks: make([]task, 0, len(page.Records))}
	for _, rec := range page.Records {
		out.Tasks = append(out.Tasks, taskOf(rec, version))
	}
	if page.Next != 0 && len(page.Records) > 0 {
		out.NextCursor = encodeTaskCursor(page.Records[len(page.Records)-1].ExecutionID)
	}
	writeResult(w, msg.ID, out)
}

// callMode is how serveOwn asks callTool to run a call: as a task, or
// with a progress sink. callTool records what the caller of serveOwn
// needs in it.
type callMode struct {
	task     bool
	progress func(engine.Progress)
	// rec is the record a task call is answered with.
	rec *store.Record
}

type callModeKey struct{}

func withCallMode(ctx context.Context, m *callMode) context.Context {
	return context.WithValue(ctx, callModeKey{}, m)
}

func callModeOf(ctx context.Context) *callMode {
	m, _ := ctx.Value(callModeKey{}).(*callMode)
	return m
}
