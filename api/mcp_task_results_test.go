package api_test

import (
	"testing"

	"github.com/carmyhq/carmy/api"
)

// TestMCPTaskClientGetsCompleteResults: at 2026-07-28, a tools/call that
// a client declaring the tasks extension makes but that is answered
// with a result, not a task (a reconcile tool, a refusal, a retry of a
// finished call), carries resultType "complete" and the server's
// serverInfo in _meta, as the same call of a client without the
// extension does.
func TestMCPTaskClientGetsCompleteResults(t *testing.T) {
	app, base := startOASNode(t, api.Config{Auth: oasAuth()})
	lost := interrupted(t, app, "planner", "lost")
	const plain = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	call := func(meta, name, args, requestID string) map[string]any {
		t.Helper()
		if requestID != "" {
			meta += `,"carmy/request_id":"` + requestID + `"`
		}
		_, msg := rpc(t, base, oasPlanner, v0728, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+name+`","arguments":`+args+`,"_meta":{`+meta+`}}}`)
		return result(t, name, msg)
	}
	// A finished identity to retry.
	if r := call(plain, "echo", `{"x":1}`, "done"); r["isError"] == true {
		t.Fatalf("echo: %v", r)
	}
	for _, c := range []struct{ what, name, args, requestID string }{
		{"carmy.lookup", "carmy.lookup", `{"request_id":"lost"}`, ""},
		{"carmy.lookup of nothing (NOT_FOUND)", "carmy.lookup", `{"request_id":"nothing"}`, ""},
		{"carmy.cancel of an interrupted execution (INVALID_STATE)", "carmy.cancel", `{"execution_id":"` + lost + `"}`, ""},
		{"carmy.resolve", "carmy.resolve", `{"execution_id":"` + lost + `","status":"failed","error":{"code":"X","message":"gone"}}`, ""},
		{"a retry of a finished call", "echo", `{"x":1}`, "done"},
		{"other arguments (IDEMPOTENCY_CONFLICT)", "echo", `{"x":2}`, "done"},
	} {
		for _, meta := range []string{plain, tasksExt} {
			r := call(meta, c.name, c.args, c.requestID)
			if r["resultType"] != "complete" || metaOf(r)["io.modelcontextprotocol/serverInfo"] == nil {
				t.Errorf("%s (extension declared: %v): %v; want resultType complete and serverInfo in _meta",
					c.what, meta == tasksExt, r)
			}
		}
	}
}
