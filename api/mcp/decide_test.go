package mcp

import (
	"encoding/json"
	"testing"
)

// TestRuntimeDecidesToolsCall: the runtime alone decides whether a
// tools/call may run, over the fast path and the SDK alike. A tool
// outside the caller's allow-list is a FORBIDDEN result whether it exists
// or not; one the runtime does not know is -32602 with the SDK's words;
// an empty name too; and one the runtime runs though the SDK's registry
// does not hold it (it was registered after the catalog's last look)
// runs: the registry is never asked.
func TestRuntimeDecidesToolsCall(t *testing.T) {
	p := newPathPair(t, true)
	some := map[string]string{"Authorization": "Bearer tok-some"}
	for _, c := range []struct {
		name, params string
		header       map[string]string
		// code is the JSON-RPC error's, else 0 and errorCode the
		// result's carmy/error_code ("" for a call that ran).
		code      int
		errorCode string
	}{
		{"allowed", `{"name":"echo"}`, some, 0, ""},
		{"outside the allow-list", `{"name":"fail"}`, some, 0, "FORBIDDEN"},
		{"unknown, outside the allow-list", `{"name":"other"}`, some, 0, "FORBIDDEN"},
		{"unknown, in the allow-list", `{"name":"nosuch"}`, some, -32602, ""},
		{"unknown", `{"name":"nosuch"}`, nil, -32602, ""},
		{"empty name", `{"name":""}`, nil, -32602, ""},
		{"bad _meta of an unknown tool", `{"name":"nosuch","_meta":{"carmy/request_id":5}}`, nil, 0, "INVALID_REQUEST"},
		{"known to the runtime only", `{"name":"unlisted"}`, nil, 0, ""},
	} {
		for path, h := range map[string]*Handler{"fast": p.fast, "sdk": p.sdk} {
			got := p.serve(h, fastCase{body: callBody("1", c.params), header: c.header})
			var msg rpcAnswer
			if err := json.Unmarshal([]byte(got.body), &msg); err != nil {
				t.Fatalf("%s over %s: %v: %s", c.name, path, err, got.body)
			}
			switch {
			case c.code != 0:
				if msg.Error == nil || msg.Error.Code != c.code {
					t.Errorf("%s over %s: %s, want JSON-RPC error %d", c.name, path, got.body, c.code)
				}
			case msg.Result == nil:
				t.Errorf("%s over %s: %s, want a result", c.name, path, got.body)
			case c.errorCode == "" && (msg.Result.IsError || msg.Result.Meta["carmy/execution_id"] == nil):
				t.Errorf("%s over %s: %s, want the call's record", c.name, path, got.body)
			case c.errorCode != "" && (!msg.Result.IsError || msg.Result.Meta[MetaErrorCode] != c.errorCode):
				t.Errorf("%s over %s: %s, want a %s refusal", c.name, path, got.body, c.errorCode)
			}
		}
		p.fastObs.take()
		p.sdkObs.take()
	}
}
