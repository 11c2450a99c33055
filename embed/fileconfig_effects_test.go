package embed

import (
	"strings"
	"testing"

	"github.com/carmyhq/carmy/engine"
)

// TestConfigEffects: effects and retry_uncertain on an HTTP tool and, in
// the map form of tools:, on an MCP server's tools; trust_annotations; and
// the refusals of a bad value.
func TestConfigEffects(t *testing.T) {
	fc := mustLoadConfig(t, `tools:
  - name: catalogue
    effects: read_only
    http: {url: "http://127.0.0.1:9/c"}
  - name: put
    effects: idempotent
    retry_uncertain: true
    http: {url: "http://127.0.0.1:9/p"}
  - name: pay
    http: {url: "http://127.0.0.1:9/pay"}
mcp_servers:
  - name: listed
    url: http://127.0.0.1:9/mcp
    tools: [a, b]
  - name: mapped
    url: http://127.0.0.1:9/mcp
    trust_annotations: true
    tools:
      search: {effects: read_only}
      upsert: {effects: idempotent, retry_uncertain: true}
      refund:
`)
	specs, err := fc.toolSpecsLogging(func(string) string { return "" }, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]engine.ToolSpec{}
	for _, s := range specs {
		got[s.Name] = s
	}
	if got["catalogue"].Effects != engine.EffectsReadOnly || got["put"].Effects != engine.EffectsIdempotent ||
		!got["put"].RetryUncertain || got["pay"].Effects != engine.EffectsOnce {
		t.Fatalf("HTTP tools' effects: %q %q/%v %q", got["catalogue"].Effects, got["put"].Effects, got["put"].RetryUncertain, got["pay"].Effects)
	}
	listed, mapped := fc.MCPServers[0], fc.MCPServers[1]
	if l := listed.Tools.list(); strings.Join(l, ",") != "a,b" || listed.TrustAnnotations {
		t.Fatalf("the list form: %v, trust %v", l, listed.TrustAnnotations)
	}
	if l := mapped.Tools.list(); strings.Join(l, ",") != "search,upsert,refund" || !mapped.TrustAnnotations {
		t.Fatalf("the map form: %v, trust %v", l, mapped.TrustAnnotations)
	}
	effects, retry, err := mapped.Tools.effects()
	if err != nil || effects["search"] != engine.EffectsReadOnly || effects["upsert"] != engine.EffectsIdempotent || !retry["upsert"] {
		t.Fatalf("the map form's effects: %v %v %v", effects, retry, err)
	}
	if _, ok := effects["refund"]; ok {
		t.Fatalf("refund, with no settings, has effects %q: want its annotations to decide", effects["refund"])
	}

	for _, bad := range []string{
		"tools:\n  - name: t\n    effects: sometimes\n    http: {url: \"http://127.0.0.1:9/\"}\n",
		"tools:\n  - name: t\n    retry_uncertain: true\n    http: {url: \"http://127.0.0.1:9/\"}\n",
		"mcp_servers:\n  - name: m\n    url: http://127.0.0.1:9/mcp\n    tools: {x: {effects: nope}}\n",
		"mcp_servers:\n  - name: m\n    url: http://127.0.0.1:9/mcp\n    tools: {x: {effect: read_only}}\n",
		"mcp_servers:\n  - name: m\n    url: http://127.0.0.1:9/mcp\n    tools: {x: {effects: read_only, retry_uncertain: true}}\n",
	} {
		fc, err := loadConfig(writeConfig(t, bad))
		if err == nil {
			if _, err = fc.toolSpecsLogging(func(string) string { return "" }, discardLogger()); err == nil {
				_, err = fc.mcpUpstreams(quietApp(), func(string) string { return "" }, t.TempDir(), discardLogger())
			}
		}
		if err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}

// TestConfigApproval: approval on an HTTP tool and on an MCP server's
// tool, its default expiry, and the refusals naming the field at fault.
func TestConfigApproval(t *testing.T) {
	fc := mustLoadConfig(t, `tools:
  - name: pay
    approval: {required: true, approvers: [bob, carol], expires_after: 2s}
    http: {url: "http://127.0.0.1:9/pay"}
  - name: refund
    approval: {required: true}
    http: {url: "http://127.0.0.1:9/refund"}
mcp_servers:
  - name: mapped
    url: http://127.0.0.1:9/mcp
    tools:
      wire: {approval: {required: true, approvers: [bob]}}
      search:
`)
	specs, err := fc.toolSpecsLogging(func(string) string { return "" }, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]engine.ToolSpec{}
	for _, s := range specs {
		got[s.Name] = s
	}
	if a := got["pay"].Approval; a == nil || strings.Join(a.Approvers, ",") != "bob,carol" || a.ExpiresAfter.String() != "2s" {
		t.Fatalf("pay's approval: %+v", a)
	}
	if a := got["refund"].Approval; a == nil || len(a.Approvers) != 0 || a.ExpiresAfter != engine.DefaultApprovalExpiry {
		t.Fatalf("refund's approval: %+v", a)
	}
	approvals, err := fc.MCPServers[0].Tools.approvals(func(string) string { return "" }, nil)
	if err != nil || approvals["wire"] == nil || approvals["wire"].Approvers[0] != "bob" || approvals["search"] != nil {
		t.Fatalf("the map form's approvals: %+v, %v", approvals, err)
	}
	for bad, field := range map[string]string{
		"tools:\n  - name: t\n    approval: {required: true, expires_after: soon}\n    http: {url: \"http://127.0.0.1:9/\"}\n":                             "approval.expires_after",
		"tools:\n  - name: t\n    approval: {approvers: [bob]}\n    http: {url: \"http://127.0.0.1:9/\"}\n":                                                "approval.required",
		"tools:\n  - name: t\n    approval: {required: true, approver: [bob]}\n    http: {url: \"http://127.0.0.1:9/\"}\n":                                 "approver",
		"tools:\n  - name: t\n    approval: {required: true, notify: {url: \"ftp://127.0.0.1:9/n\"}}\n    http: {url: \"http://127.0.0.1:9/\"}\n":          "approval: notify: the url is not an absolute http or https URL",
		"tools:\n  - name: t\n    approval: {required: true, notify: {}}\n    http: {url: \"http://127.0.0.1:9/\"}\n":                                      "approval.notify.url",
		"tools:\n  - name: t\n    approval: {required: true, notify: {url: \"${UNSET}\"}}\n    http: {url: \"http://127.0.0.1:9/\"}\n":                     "approval.notify.url: environment variable UNSET is not set",
		"tools:\n  - name: t\n    approval: {required: true, notify: {url: \"http://127.0.0.1:9/n\", hmm: 1}}\n    http: {url: \"http://127.0.0.1:9/\"}\n": "hmm",
		"tools:\n  - name: t\n    effects: read_only\n    approval: {required: true}\n    http: {url: \"http://127.0.0.1:9/\"}\n":                          "approval",
		"mcp_servers:\n  - name: m\n    url: http://127.0.0.1:9/mcp\n    tools: {x: {approval: {required: true, expires_after: -1s}}}\n":                   "approval.expires_after",
	} {
		fc, err := loadConfig(writeConfig(t, bad))
		if err == nil {
			if _, err = fc.toolSpecsLogging(func(string) string { return "" }, discardLogger()); err == nil {
				_, err = fc.mcpUpstreams(quietApp(), func(string) string { return "" }, t.TempDir(), discardLogger())
			}
		}
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("want an error naming %s, got %v, for:\n%s", field, err, bad)
		}
	}
}
