package bench

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// The transports `carmy bench --transport` drives.
const (
	transportHTTP = "http" // POST /v1/tools/call
	transportMCP  = "mcp"  // tools/call at /mcp (SPEC §5.1)
)

// mcpBenchVersion is the protocol version the MCP transport speaks: the
// newest with the initialize handshake, which a stateless server does
// not need before a tools/call.
const mcpBenchVersion = "2025-11-25"

// mcpBody returns the head and the tail of a tools/call whose request id
// goes between them:
//
//	{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"…",
//	 "arguments":{"payload":"…"},"_meta":{"carmy/session_id":"…","carmy/request_id":"<id>"}}}
func mcpBody(tool string, argsSize int, session string) (head, tail []byte) {
	head = make([]byte, 0, 160+len(tool)+argsSize+len(session))
	head = append(head, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`...)
	head = append(head, tool...)
	head = append(head, `","arguments":{"payload":"`...)
	head = appendRandomText(head, argsSize)
	head = append(head, `"},"_meta":{"carmy/session_id":"`...)
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
