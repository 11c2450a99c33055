package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/carmyhq/carmy/internal/mcpclient"
	"github.com/carmyhq/carmy/internal/mcpversion"
)

// The transports `carmy bench --transport` drives.
const (
	transportHTTP = "http" // POST /v1/tools/call
	transportMCP  = "mcp"  // tools/call at /mcp (docs/mcp.md)
)

// mcpVersionNewest is the default of `carmy bench --mcp-version`.
const mcpVersionNewest = mcpversion.Latest

// mcpVersions are the versions --mcp-version takes, newest first: those
// of Carmy's fast path (internal/mcpversion).
var mcpVersions = mcpversion.Versions(func(f mcpversion.Features) bool { return f.FastPath })

// mcpHeaders are the headers of every tools/call of tool at version
// (mcpclient.Headers), Content-Type first, sorted by name after it.
func mcpHeaders(version, tool string) [][2]string {
	h := mcpclient.Headers(version, mcpclient.MethodCallTool, tool)
	out := [][2]string{{"Content-Type", h.Get("Content-Type")}}
	h.Del("Content-Type")
	for _, k := range slices.Sorted(maps.Keys(h)) {
		out = append(out, [2]string{k, h.Get(k)})
	}
	return out
}

// mcpBody returns the head and the tail of a tools/call at version whose
// request id goes between them:
//
//	{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"…",
//	 "arguments":{"payload":"…"},"_meta":{…,"carmy/session_id":"…","carmy/request_id":"<id>"}}}
//
// At a stateless version (2026-07-28 on), _meta begins with the
// protocol's own keys, as an MCP client sends them with every request
// (mcpclient.AppendProtocolMeta): the version, the client's name and its
// (empty) capabilities.
func mcpBody(version, tool string, argsSize int, session string) (head, tail []byte) {
	head = make([]byte, 0, 360+len(tool)+argsSize+len(session))
	head = append(head, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`...)
	head = append(head, tool...)
	head = append(head, `","arguments":{"payload":"`...)
	head = appendRandomText(head, argsSize)
	head = append(head, `"},"_meta":{`...)
	head = mcpclient.AppendProtocolMeta(head, version, "carmy-bench")
	head = append(head, `"carmy/session_id":"`...)
	head = append(head, session...)
	head = append(head, `","carmy/request_id":"`...)
	return head, []byte(`"}}}`)
}

// classifyMCP names the outcome of an answer of /mcp: ran or replayed
// for a result with Carmy's record (carmy/replayed), the refusal's code
// (carmy/error_code, EXECUTION_UNCERTAIN/<status> as over HTTP) for an
// isError refusal, rpc_<code> for a JSON-RPC error, http_<status> for
// anything else.
func classifyMCP(status int, body []byte) (outcome, detail string) {
	var msg struct {
		Result *struct {
			Meta struct {
				Replayed  *bool  `json:"carmy/replayed"`
				ErrorCode string `json:"carmy/error_code"`
			} `json:"_meta"`
			Structured struct {
				Error *struct {
					Message string `json:"message"`
					Status  string `json:"status"`
				} `json:"error"`
			} `json:"structuredContent"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if status == 200 && json.Unmarshal(body, &msg) == nil {
		switch r := msg.Result; {
		case r != nil && r.Meta.ErrorCode != "" && len(r.Meta.ErrorCode) <= 64 && jsonSafe(r.Meta.ErrorCode):
			outcome = r.Meta.ErrorCode
			msgText := ""
			if e := r.Structured.Error; e != nil {
				msgText = e.Message
				if outcome == "EXECUTION_UNCERTAIN" && e.Status != "" && len(e.Status) <= 32 && jsonSafe(e.Status) {
					outcome += "/" + e.Status
				}
			}
			return outcome, fmt.Sprintf("isError %s: %s", r.Meta.ErrorCode, msgText)
		case r != nil && r.Meta.Replayed != nil && *r.Meta.Replayed:
			return outcomeReplayed, ""
		case r != nil && r.Meta.Replayed != nil:
			return outcomeRan, ""
		case msg.Error != nil:
			return "rpc_" + strconv.Itoa(msg.Error.Code), fmt.Sprintf("JSON-RPC error %d: %s", msg.Error.Code, msg.Error.Message)
		}
	}
	return classifyError(status, body)
}
