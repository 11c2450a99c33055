package embed

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// TestConfigApprovalNotify: approval.notify on an HTTP tool is accepted,
// its url's ${VAR} expanded, and a call of the tool awaiting approval is
// notified to it; on an MCP server's tool too. A url the egress policy
// refuses (egress.allow, the tool's allow_networks, the deny list) is
// refused when the config is loaded into tools, naming the key and not
// the url's secrets.
func TestConfigApprovalNotify(t *testing.T) {
	var (
		mu     sync.Mutex
		bodies []string
		query  string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		bodies, query = append(bodies, string(b)), r.URL.RawQuery
	}))
	t.Cleanup(hook.Close)
	env := fakeEnv(map[string]string{"HOOK": hook.URL, "TOKEN": "tok-SECRET"})
	fc := mustLoadConfig(t, `tools:
  - name: pay
    approval: {required: true, approvers: [bob], notify: {url: "${HOOK}/approvals?token=${TOKEN}"}}
    http: {url: "http://127.0.0.1:9/pay"}
mcp_servers:
  - name: m
    url: http://127.0.0.1:9/mcp
    tools:
      wire: {approval: {required: true, notify: {url: "https://hooks.example.com/carmy"}}}
`)
	specs, err := fc.toolSpecsLogging(env, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	if n := specs[0].Approval.Notify; n == nil || n.URL != hook.URL+"/approvals?token=tok-SECRET" {
		t.Fatalf("pay's notify: %+v", n)
	}
	if a, err := fc.MCPServers[0].Tools.approvals(env, nil); err != nil || a["wire"].Notify == nil || a["wire"].Notify.URL != "https://hooks.example.com/carmy" {
		t.Fatalf("the MCP server's tool's notify: %+v, %v", a, err)
	}
	app := quietApp()
	if err := app.AddTool(specs[0]); err != nil {
		t.Fatal(err)
	}
	resp, err := app.Call(t.Context(), carmy.Caller{Principal: "p"}, carmy.Request{Tool: "pay", RequestID: "r1", SessionID: "s"})
	if err != nil || !resp.Awaiting {
		t.Fatalf("gated call: %+v, %v", resp, err)
	}
	wait.Until(t, 30*time.Second, "the notification", func() bool { mu.Lock(); defer mu.Unlock(); return len(bodies) > 0 })
	mu.Lock()
	var got map[string]any
	_ = json.Unmarshal([]byte(bodies[0]), &got)
	if got["execution_id"] != resp.Record.ExecutionID || got["tool"] != "pay" || got["principal"] != "p" || got["session_id"] != "s" || query != "token=tok-SECRET" {
		t.Errorf("notification %s (query %q)", bodies[0], query)
	}
	mu.Unlock()

	for name, tc := range map[string]struct{ config, want string }{
		"a metadata address": {`tools:
  - name: t
    approval: {required: true, notify: {url: "http://169.254.169.254/hook?token=${TOKEN}"}}
    http: {url: "http://127.0.0.1:9/"}
`, "config tools[0] (t): approval: notify: url http://169.254.169.254/hook?[redacted]: its host 169.254.169.254 is a cloud metadata address: the egress policy does not allow it"},
		"outside egress.allow": {`egress: {allow: [10.0.0.0/8]}
tools:
  - name: t
    approval: {required: true, notify: {url: "http://127.0.0.1:9/hook"}}
    http: {url: "http://10.0.0.1:9/"}
`, "its host 127.0.0.1 is outside the allowed networks: the egress policy does not allow it"},
		"outside the tool's allow_networks": {`tools:
  - name: t
    approval: {required: true, notify: {url: "http://127.0.0.1:9/hook"}}
    http: {url: "http://10.0.0.1:9/", allow_networks: [10.0.0.0/8]}
`, "its host 127.0.0.1 is outside the allowed networks"},
		"an MCP server's, outside its allow_networks": {`mcp_servers:
  - name: m
    url: http://10.0.0.1:9/mcp
    allow_networks: [10.0.0.0/8]
    tools: {wire: {approval: {required: true, notify: {url: "http://127.0.0.1:9/hook"}}}}
`, "config mcp_servers[0] (m): tools.wire: approval: notify: url http://127.0.0.1:9/hook: its host 127.0.0.1 is outside the allowed networks"},
	} {
		fc := mustLoadConfig(t, tc.config)
		_, err := fc.toolSpecsLogging(env, discardLogger())
		if err == nil {
			_, err = fc.mcpUpstreams(quietApp(), env, t.TempDir(), discardLogger())
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: %v\nwant an error with %q, without the secret", name, err, tc.want)
		}
	}
}
