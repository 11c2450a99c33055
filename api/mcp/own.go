package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/api/mcp/internal/fastpath"
	"github.com/carmyhq/carmy/internal/jsonscan"
	"github.com/carmyhq/carmy/internal/mcpversion"
)

// The messages Carmy answers itself, before the fast path and the SDK
// (serveOwn), because the SDK has no notion of them:
//
//   - tasks/get, tasks/result, tasks/list, tasks/cancel and tasks/update
//     (tasks.go), and a tools/call that asks for a task: params.task
//     before 2026-07-28, the io.modelcontextprotocol/tasks extension in
//     the request's client capabilities from 2026-07-28 on;
//   - a tools/call with a progressToken from a client that accepts an
//     event stream (progress.go);
//   - notifications/cancelled (inflight.go);
//   - subscriptions/listen, with upstreams (listen.go);
//   - tools/list at 2025-11-25, whose tools gain
//     execution.taskSupport "optional", and initialize, whose
//     capabilities gain tasks (the SDK answers them; Carmy adds what it
//     serves), and whose answer assigns a transport session (sender.go).
//
// Every other message goes on as before. A cheap look at the bytes comes
// first (ownMarkers), so that a plain tools/call pays a few substring
// searches and nothing else.

// ownMarkers are substrings one of which every message serveOwn answers
// holds.
var ownMarkers = [][]byte{
	[]byte(`tasks`), []byte(`"task"`), []byte(`progressToken`), []byte(`notifications/cancelled`),
	[]byte(`"tools/list"`), []byte(`"initialize"`), []byte(`"server/discover"`), []byte(`"subscriptions/listen"`),
}

// mayBeOwn reports whether body holds one of ownMarkers: whether serveOwn
// may answer it.
func mayBeOwn(body []byte) bool { return hasAny(body, ownMarkers) }

// ownMessage is a JSON-RPC message as serveOwn reads it.
type ownMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// ownParams are the params serveOwn reads: of a tools/call, of a task
// method, of a notification.
type ownParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      map[string]any  `json:"_meta"`
	Task      json.RawMessage `json:"task"`
	TaskID    *string         `json:"taskId"`
	Cursor    *string         `json:"cursor"`
	RequestID json.RawMessage `json:"requestId"`
}

// Keys and values of the protocol that serveOwn reads.
const (
	metaProgressToken      = "progressToken"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaRelatedTask        = "io.modelcontextprotocol/related-task"
	extensionTasks         = "io.modelcontextprotocol/tasks"
)

// serveOwn answers body, a valid JSON message of r admitted already, when
// it is one of Carmy's own (above), and reports whether it did.
func (h *Handler) serveOwn(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if !mayBeOwn(body) {
		return false
	}
	var msg ownMessage
	if json.Unmarshal(body, &msg) != nil || len(msg.Params) > 0 && msg.Params[0] != '{' {
		return false
	}
	var p ownParams
	if len(msg.Params) > 0 && json.Unmarshal(msg.Params, &p) != nil {
		return false
	}
	version := versionOf(r, p.Meta)
	switch msg.Method {
	case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel", "tasks/update":
		ext := mcpversion.For(version).TasksExtension
		if msg.ID == nil || msg.Method == "tasks/list" && ext || msg.Method == "tasks/update" && !ext {
			return false // the SDK answers: not a request, or no such method at this version
		}
		h.serveTaskMethod(w, r, msg, p, version)
		return true
	case methodCallTool:
		if msg.ID == nil {
			return false
		}
		if wantsTask(p, version) {
			h.serveTaskCall(w, r, msg, p, version)
			return true
		}
		if _, ok := p.Meta[metaProgressToken]; ok {
			if _, streamOK := fastpath.Accepts(r.Header.Values("Accept")); streamOK {
				h.serveProgressCall(w, r, msg, p)
				return true
			}
		}
	case "notifications/cancelled":
		h.serveCancelled(w, r, p)
		return true
	case "tools/list":
		if mcpversion.For(version).TasksCore {
			h.servePatched(w, r, body, patchToolsList)
			return true
		}
	case "initialize", "server/discover":
		patch := h.patchCapabilities
		if msg.Method == "initialize" {
			patch = func(result map[string]any, version string) {
				h.patchCapabilities(result, version)
				patchSession(w.Header(), result) // sender.go
			}
		}
		h.servePatched(w, r, body, patch)
		return true
	case "subscriptions/listen":
		if h.cfg.Upstreams != nil && msg.ID != nil && mcpversion.For(version).Stateless {
			h.serveListen(w, r, msg) // listen.go
			return true
		}
	}
	return false
}

// wantsTask reports whether a tools/call asks for a task: params.task
// before 2026-07-28; from then on, a client that declares the tasks
// extension, to which Carmy always answers with a task (the server
// decides, and Carmy's executions are durable).
func wantsTask(p ownParams, version string) bool {
	if !mcpversion.For(version).TasksExtension {
		return len(p.Task) > 0 && string(p.Task) != "null"
	}
	caps, _ := p.Meta[metaClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[extensionTasks]
	return ok
}

// versionOf is the request's protocol version: its Mcp-Protocol-Version
// header, else the one its _meta names (2026-07-28), else "".
func versionOf(r *http.Request, meta map[string]any) string {
	return protocolVersion(r.Header, meta)
}

// protocolVersion is versionOf a request of header and _meta meta.
func protocolVersion(header http.Header, meta map[string]any) string {
	if v := header.Get("Mcp-Protocol-Version"); v != "" {
		return v
	}
	v, _ := meta[metaProtocolVersion].(string)
	return v
}

// hasAny reports whether body holds one of subs.
func hasAny(body []byte, subs [][]byte) bool {
	for _, s := range subs {
		if bytes.Contains(body, s) {
			return true
		}
	}
	return false
}

// callRequest is the SDK's request of a tools/call that serveOwn answers,
// as the SDK would build it.
func callRequest(r *http.Request, p ownParams) *sdk.CallToolRequest {
	return &sdk.CallToolRequest{
		Params: &sdk.CallToolParamsRaw{Name: p.Name, Arguments: p.Arguments, Meta: p.Meta},
		Extra:  &sdk.RequestExtra{TokenInfo: auth.TokenInfoFromContext(r.Context()), Header: r.Header},
	}
}

// writeResult answers the request of id with result, as JSON.
func writeResult(w http.ResponseWriter, id json.RawMessage, result any) {
	raw, err := jsonscan.MarshalNoHTML(result)
	if err != nil {
		writeRPCError(w, http.StatusOK, id, jsonrpc.CodeInternalError, "internal error", nil)
		return
	}
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(responseBytes(id, raw))
}

// responseBytes is the JSON-RPC response to id with the encoded result.
func responseBytes(id, result json.RawMessage) []byte {
	out := make([]byte, 0, len(id)+len(result)+40)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"result":`...)
	out = append(out, result...)
	return append(out, '}')
}

// writeErrorResult answers the request of id with a JSON-RPC error, in
// a 200 (an error of the method, not of the transport).
func writeErrorResult(w http.ResponseWriter, id json.RawMessage, err error) {
	code, msg := int64(jsonrpc.CodeInternalError), "internal error"
	var data any
	if je, ok := err.(*jsonrpc.Error); ok {
		code, msg = je.Code, je.Message
		if len(je.Data) > 0 {
			data = je.Data
		}
	}
	writeRPCError(w, http.StatusOK, id, int(code), msg, data)
}

// servePatched has the SDK answer r (whose body is body) and passes its
// answer through patch when it is a JSON result.
func (h *Handler) servePatched(w http.ResponseWriter, r *http.Request, body []byte, patch func(result map[string]any, version string)) {
	rec := httptest.NewRecorder()
	r.Body = restoredBody(body, nil, r.Body)
	h.stream.ServeHTTP(rec, r)
	out := rec.Body.Bytes()
	if rec.Code == http.StatusOK && rec.Header().Get("Content-Type") == "application/json" {
		var resp map[string]json.RawMessage
		var result map[string]any
		if json.Unmarshal(out, &resp) == nil && resp["result"] != nil && json.Unmarshal(resp["result"], &result) == nil {
			patch(result, versionOf(r, nil))
			if raw, err := jsonscan.MarshalNoHTML(result); err == nil {
				resp["result"] = raw
				if b, err := jsonscan.MarshalNoHTML(resp); err == nil {
					out = b
				}
			}
		}
	}
	for k, vs := range rec.Header() {
		if k == "Content-Length" {
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(out)
}

// patchToolsList marks every tool as supporting tasks (2025-11-25).
func patchToolsList(result map[string]any, _ string) {
	tools, _ := result["tools"].([]any)
	for _, t := range tools {
		if m, ok := t.(map[string]any); ok {
			m["execution"] = map[string]any{"taskSupport": "optional"}
		}
	}
}

// patchInitialize declares the tasks Carmy serves in the answer to
// initialize or server/discover, at the version the SDK agreed: 2025-11-25's tasks capability (list, cancel, and tools/call
// as a task), or from 2026-07-28 on the tasks extension.
func patchInitialize(result map[string]any, _ string) {
	caps, _ := result["capabilities"].(map[string]any)
	if caps == nil {
		return
	}
	version, _ := result["protocolVersion"].(string)
	if _, discover := result["supportedVersions"]; discover {
		version = mcpversion.First(func(f mcpversion.Features) bool { return f.Stateless }) // server/discover exists from then on
	}
	switch f := mcpversion.For(version); {
	case f.TasksExtension:
		ext, _ := caps["extensions"].(map[string]any)
		if ext == nil {
			ext = map[string]any{}
			caps["extensions"] = ext
		}
		ext[extensionTasks] = map[string]any{}
	case f.TasksCore:
		caps["tasks"] = map[string]any{
			"list": map[string]any{}, "cancel": map[string]any{},
			"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}},
		}
	}
}
