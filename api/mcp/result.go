package mcp

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// resultOf is the result of an answered call (docs/mcp.md): one text item
// with the JSON of data (or of {"error": …}), structuredContent data when
// it is an object, else {"value": data} (or the {"error": …} object), and
// Carmy's keys in _meta. completed has isError false; failed, timed_out
// and cancelled have isError true. The recorded bytes are used as they
// are, not decoded and encoded again.
func resultOf(resp engine.Response) *sdk.CallToolResult {
	rec := resp.Record
	meta := sdk.Meta{
		MetaExecutionID: rec.ExecutionID,
		MetaStatus:      statusValue(rec.Status),
		MetaReplayed:    resp.Replayed,
	}
	if rec.Key.RequestID != "" {
		meta[MetaRequestID] = rec.Key.RequestID
	}
	if resp.Passthrough {
		meta[MetaRecorded] = false
	}
	if rec.Status == store.StatusCompleted {
		data := rec.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		structured := data
		if !isObject(data) {
			structured = wrap("value", data)
		}
		return newResult(meta, data, structured, false)
	}
	errObj := rec.Error
	if resp.Awaiting {
		// Gated: the tool has not run; a person must approve it first
		// (docs/mcp.md). The same request_id asks again.
		errObj, _ = json.Marshal(map[string]string{
			"code": engine.CodeApprovalPending, "execution_id": rec.ExecutionID,
			"message": "the call awaits approval before the tool runs; call again with the same request_id for the outcome",
		})
	}
	if !isObject(errObj) {
		errObj = json.RawMessage(`{"code":"` + engine.CodeToolError + `","message":""}`)
	}
	body := wrap("error", errObj)
	return newResult(meta, body, body, true)
}

// resultBox holds a result of resultOf and its one text item, in one
// allocation.
type resultBox struct {
	res     sdk.CallToolResult
	text    sdk.TextContent
	content [1]sdk.Content
}

// newResult is the result with meta, one text item holding text, and
// structured as its structuredContent.
func newResult(meta sdk.Meta, text []byte, structured json.RawMessage, isError bool) *sdk.CallToolResult {
	b := &resultBox{text: sdk.TextContent{Text: string(text)}}
	b.content[0] = &b.text
	b.res = sdk.CallToolResult{Meta: meta, Content: b.content[:], StructuredContent: structured, IsError: isError}
	return &b.res
}

// statusValues are the statuses as _meta values, boxed once.
var statusValues = func() map[store.Status]any {
	m := map[store.Status]any{}
	for _, s := range []store.Status{store.StatusRunning, store.StatusInterrupted, store.StatusCompleted, store.StatusFailed, store.StatusTimedOut, store.StatusCancelled,
		store.StatusAwaitingApproval, store.StatusDenied, store.StatusExpired} {
		m[s] = string(s)
	}
	return m
}()

// statusValue is status as a _meta value: its string.
func statusValue(status store.Status) any {
	if v, ok := statusValues[status]; ok {
		return v
	}
	return string(status)
}

// refusal is the result of a call Carmy refused (IDEMPOTENCY_CONFLICT,
// EXECUTION_UNCERTAIN, IDEMPOTENCY_CAPACITY, UNAVAILABLE, INVALID_REQUEST,
// FORBIDDEN, RATE_LIMITED): isError true, so that the model sees it and can
// reconcile, structuredContent the envelope of docs/errors.md with the same extra
// fields as over HTTP, and carmy/error_code in _meta. It records the code
// in info.
func refusal(err error, info *CallInfo) *sdk.CallToolResult {
	code := store.CodeOf(err)
	fields := map[string]any{}
	var f interface{ Fields() map[string]any }
	if errors.As(err, &f) {
		for k, v := range f.Fields() {
			fields[k] = v
		}
	}
	fields["code"], fields["message"] = code, err.Error()
	var ue *store.UncertainError
	if code == store.CodeUncertain && errors.As(err, &ue) {
		fields["message"] = err.Error() + ". " + uncertainAdvice(ue.Record.Status, ue.Record.ExecutionID)
	}
	if id, ok := fields["execution_id"].(string); ok {
		info.ExecutionID = id
	}
	if st, ok := fields["status"].(store.Status); ok {
		info.Status = string(st)
	}
	info.Code = code
	info.StoreDetail = store.DetailOf(err)
	body, mErr := json.Marshal(map[string]any{"error": fields})
	if mErr != nil { // a field that does not encode: the envelope without it
		body, _ = json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": err.Error()}})
	}
	return &sdk.CallToolResult{
		Meta:              sdk.Meta{MetaErrorCode: code},
		Content:           textOf(body),
		StructuredContent: json.RawMessage(body),
		IsError:           true,
	}
}

// refusalCodes are the codes answered as refusals; any other error of a
// call is answered as a JSON-RPC error (answer).
var refusalCodes = map[string]bool{
	store.CodeConflict:       true,
	store.CodeUncertain:      true,
	store.CodeCapacity:       true,
	store.CodeUnavailable:    true,
	store.CodeInvalidRequest: true,
	store.CodeForbidden:      true,
	store.CodeRateLimited:    true,
}

// answer turns the error of a call into what the client is told: JSON-RPC
// error -32602 for an unknown tool, as MCP requires (the runtime's
// UNKNOWN_TOOL, or an empty params.name, as the SDK answers both); a
// refusal for Carmy's refusals; -32603 with a generic message for
// anything else (the detail is for the log). A call whose context ended
// is UNAVAILABLE, as over HTTP (engine.RequestEnded).
func answer(err error, info *CallInfo) (*sdk.CallToolResult, error) {
	err, _ = engine.RequestEnded(err)
	code := store.CodeOf(err)
	var fe *store.FieldError
	switch {
	case code == store.CodeUnknownTool, errors.As(err, &fe) && fe.Field == "tool":
		info.Code = store.CodeUnknownTool
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", info.Tool)}
	case refusalCodes[code]:
		return refusal(err, info), nil
	}
	info.Code = store.CodeInternal
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
}

// codeOfRPCError returns the error code (docs/errors.md) of a tools/call the SDK answered
// with a JSON-RPC error (an unknown tool: -32602), for the metrics.
func codeOfRPCError(err error) string {
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams {
		return store.CodeUnknownTool
	}
	return store.CodeInternal
}

// textOf is one text item holding raw JSON text.
func textOf(raw []byte) []sdk.Content { return []sdk.Content{&sdk.TextContent{Text: string(raw)}} }

// wrap returns {"<key>": raw}.
func wrap(key string, raw json.RawMessage) json.RawMessage {
	out := make([]byte, 0, len(key)+len(raw)+6)
	out = append(out, `{"`...)
	out = append(out, key...)
	out = append(out, `":`...)
	out = append(out, raw...)
	return append(out, '}')
}

// isObject reports whether raw is a JSON object (recorded data is valid
// JSON already).
func isObject(raw []byte) bool {
	for _, b := range raw {
		switch b {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return b == '{'
	}
	return false
}
