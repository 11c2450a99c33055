package guarantees_test

import (
	"encoding/json"
	"fmt"
)

// answer is what a call, a cancel or a resolve was answered, whichever
// way it reached the node: a result (code "") or a refusal (code set).
type answer struct {
	Code        string          // "" for a result; the error code of a refusal
	Status      string          // the record's status, or the refusal's (running, interrupted)
	ExecutionID string          //
	Replayed    bool            //
	Resolved    bool            // from a record (HTTP, the reconcile tools); an MCP call result does not say
	ToolRan     *bool           // a refusal's tool_ran, when it says
	Data        json.RawMessage // a completed result's data
	Raw         string          // the answer as sent, for messages
}

func (a answer) String() string {
	if len(a.Raw) > 600 {
		return a.Raw[:600] + "…"
	}
	return a.Raw
}

// is reports whether a is a result with status.
func (a answer) is(status string) bool { return a.Code == "" && a.Status == status }

// refused reports whether a is a refusal with code (and status, when given).
func (a answer) refused(code, status string) bool {
	return a.Code == code && (status == "" || a.Status == status)
}

// httpAnswer reads an answer of the HTTP API: a record (200, 202) or the
// error envelope.
func httpAnswer(status int, body []byte) answer {
	a := answer{Raw: fmt.Sprintf("%d %s", status, body)}
	if status/100 == 2 {
		var rec struct {
			ExecutionID string          `json:"execution_id"`
			Status      string          `json:"status"`
			Replayed    bool            `json:"replayed"`
			Resolved    bool            `json:"resolved"`
			Released    bool            `json:"released"`
			Data        json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(body, &rec); err != nil {
			a.Code = "BAD_ANSWER"
			return a
		}
		a.ExecutionID, a.Status, a.Replayed, a.Resolved, a.Data = rec.ExecutionID, rec.Status, rec.Replayed, rec.Resolved, rec.Data
		if rec.Released {
			a.Status = "released"
		}
		return a
	}
	var env struct {
		Error struct {
			Code        string `json:"code"`
			Status      string `json:"status"`
			ExecutionID string `json:"execution_id"`
			ToolRan     *bool  `json:"tool_ran"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Error.Code == "" {
		a.Code = "BAD_ANSWER"
		return a
	}
	a.Code, a.Status, a.ExecutionID, a.ToolRan = env.Error.Code, env.Error.Status, env.Error.ExecutionID, env.Error.ToolRan
	return a
}

// mcpResult reads a tools/call result (as JSON): Carmy's _meta says the
// execution, its status and a refusal's code; structuredContent holds the
// data or the error envelope.
func mcpResult(raw json.RawMessage) answer {
	a := answer{Raw: string(raw)}
	var res struct {
		IsError    bool            `json:"isError"`
		Meta       map[string]any  `json:"_meta"`
		Structured json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		a.Code = "BAD_ANSWER"
		return a
	}
	str := func(k string) string { s, _ := res.Meta[k].(string); return s }
	a.ExecutionID, a.Status = str("carmy/execution_id"), str("carmy/status")
	a.Replayed, _ = res.Meta["carmy/replayed"].(bool)
	if code := str("carmy/error_code"); code != "" {
		a.Code = code
		var env struct {
			Error struct {
				Status      string `json:"status"`
				ExecutionID string `json:"execution_id"`
				ToolRan     *bool  `json:"tool_ran"`
			} `json:"error"`
		}
		_ = json.Unmarshal(res.Structured, &env)
		a.Status, a.ToolRan = env.Error.Status, env.Error.ToolRan
		if env.Error.ExecutionID != "" {
			a.ExecutionID = env.Error.ExecutionID
		}
		return a
	}
	if released(res.Structured) {
		a.Status = "released"
		return a
	}
	if a.Status == "" {
		// A reconcile tool's answer: the record itself.
		var rec struct {
			ExecutionID string          `json:"execution_id"`
			Status      string          `json:"status"`
			Resolved    bool            `json:"resolved"`
			Released    bool            `json:"released"`
			Data        json.RawMessage `json:"data"`
		}
		if json.Unmarshal(res.Structured, &rec) == nil && rec.Status != "" {
			a.ExecutionID, a.Status, a.Resolved, a.Data = rec.ExecutionID, rec.Status, rec.Resolved, rec.Data
			if rec.Released {
				a.Status = "released"
			}
		}
		return a
	}
	if !res.IsError {
		a.Data = res.Structured
	}
	return a
}

// rpcError is the answer of a JSON-RPC error.
func rpcError(code int, message string) answer {
	return answer{Code: fmt.Sprintf("JSONRPC %d", code), Raw: message}
}

// dataN returns the "n" the upstream echoed in a's data (nil for none).
func (a answer) dataN() any {
	var d struct {
		N     any             `json:"n"`
		Value json.RawMessage `json:"value"`
	}
	_ = json.Unmarshal(a.Data, &d)
	return d.N
}

// released reports whether a reconcile tool's record says it was released.
func released(structured json.RawMessage) bool {
	var rec struct {
		Released bool `json:"released"`
	}
	return json.Unmarshal(structured, &rec) == nil && rec.Released
}
