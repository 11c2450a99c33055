package embed

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// specMCPExample is the mcp_servers example of docs/mcp.md#carmy-in-front-of-mcp-servers-the-gateway, and a stdio one.
const specMCPExample = `mcp_servers:
  - name: tickets                      # tools appear as tickets.<upstream tool name>
    url: https://tickets.internal/mcp  # Streamable HTTP; or, instead:
    # command: ["/usr/local/bin/tickets-mcp", "--stdio"]   # stdio, one child process per node
    headers: {Authorization: "Bearer ${TICKETS_TOKEN}"}
    tools: [create_ticket, close_ticket]   # optional allow-list; default: every upstream tool
    timeout: 30s
    dedupe_window: 10m                 # or require_request_id: true (which then wins)
  - name: local
    command: ["/usr/local/bin/tickets-mcp", "--stdio"]
    require_request_id: true
`

func TestMCPServersConfig(t *testing.T) {
	fc := mustLoadConfig(t, specMCPExample)
	getenv := func(k string) string { return map[string]string{"TICKETS_TOKEN": "tickets-SECRET-1"}[k] }
	ups, err := fc.mcpUpstreams(quietApp(), getenv, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) != 2 || ups[0].Name() != "tickets" || ups[1].Name() != "local" {
		t.Fatalf("upstreams %v", ups)
	}
	// An unset variable is an error naming it, not the URL.
	if _, err := fc.mcpUpstreams(quietApp(), func(string) string { return "" }, "", slog.New(slog.DiscardHandler)); err == nil ||
		!strings.Contains(err.Error(), "TICKETS_TOKEN") {
		t.Fatalf("unset variable: %v", err)
	}
}

func TestMCPServersConfigRefused(t *testing.T) {
	for name, text := range map[string]string{
		"unknown key":   "mcp_servers:\n  - {name: a, url: http://127.0.0.1:1/mcp, urll: x}\n",
		"both":          "mcp_servers:\n  - {name: a, url: http://127.0.0.1:1/mcp, command: [x]}\n",
		"neither":       "mcp_servers:\n  - {name: a}\n",
		"dotted name":   "mcp_servers:\n  - {name: a.b, url: http://127.0.0.1:1/mcp}\n",
		"twice":         "mcp_servers:\n  - {name: a, url: http://127.0.0.1:1/mcp}\n  - {name: a, command: [x]}\n",
		"bad window":    "mcp_servers:\n  - {name: a, url: http://127.0.0.1:1/mcp, dedupe_window: -1m}\n",
		"bad timeout":   "mcp_servers:\n  - {name: a, url: http://127.0.0.1:1/mcp, timeout: soon}\n",
		"empty tools":   "mcp_servers:\n  - {name: a, url: http://127.0.0.1:1/mcp, tools: []}\n",
		"not a URL":     "mcp_servers:\n  - {name: a, url: \"ftp://h/x?token=SECRET\"}\n",
		"outside allow": "egress: {allow: [10.0.0.0/8]}\nmcp_servers:\n  - {name: a, url: http://127.0.0.1:1/mcp, allow_networks: [192.168.0.0/16]}\n",
		"shadowed":      "tools:\n  - {name: a.x, http: {url: http://127.0.0.1:1/}}\nmcp_servers:\n  - {name: a, url: http://127.0.0.1:1/mcp}\n",
		"reserved":      "mcp_servers:\n  - {name: carmy, command: [x]}\n",
		"env for a url": "mcp_servers:\n  - {name: a, url: http://127.0.0.1:1/mcp, env: {A: b}}\n",
		"dir for a url": "mcp_servers:\n  - {name: a, url: http://127.0.0.1:1/mcp, dir: /tmp}\n",
		"unset in env":  "mcp_servers:\n  - {name: a, command: [x], env: {KEY: \"${CARMY_UNSET_VAR}\"}}\n",
		"no dir":        "mcp_servers:\n  - {name: a, command: [x], dir: /nonexistent/carmy}\n",
		"bad grace":     "mcp_servers:\n  - {name: a, command: [x], cancel_grace: soon}\n",
	} {
		t.Run(name, func(t *testing.T) {
			fc, err := loadConfig(writeConfig(t, text))
			if err == nil {
				_, err = fc.mcpUpstreams(quietApp(), func(string) string { return "" }, "", slog.New(slog.DiscardHandler))
			}
			if err == nil {
				t.Fatalf("accepted:\n%s", text)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Fatalf("the error names a secret: %v", err)
			}
		})
	}
}

// TestToolSpecsDedupeWindow: an HTTP tool's dedupe_window reaches its
// ToolSpec; a bad one is refused.
func TestToolSpecsDedupeWindow(t *testing.T) {
	fc := mustLoadConfig(t, "tools:\n  - {name: a, dedupe_window: 10m, http: {url: http://127.0.0.1:1/}}\n")
	specs, err := fc.toolSpecsLogging(func(string) string { return "" }, discardLogger())
	if err != nil || len(specs) != 1 || specs[0].DedupeWindow != 10*time.Minute {
		t.Fatalf("specs %+v, %v", specs, err)
	}
	for _, w := range []string{"soon", "0s", "-1m"} {
		fc := mustLoadConfig(t, "tools:\n  - {name: a, dedupe_window: "+w+", http: {url: http://127.0.0.1:1/}}\n")
		if _, err := fc.toolSpecsLogging(func(string) string { return "" }, discardLogger()); err == nil {
			t.Errorf("dedupe_window %s accepted", w)
		}
	}
}

// TestMCPServersCommandConfig: a command's env (expanded), dir and
// cancel_grace are taken; without dir, the child gets a private directory
// under the data dir.
func TestMCPServersCommandConfig(t *testing.T) {
	dataDir := t.TempDir()
	fc := mustLoadConfig(t, `mcp_servers:
  - name: local
    command: ["/bin/true"]
    env: {API_KEY: "k-${CARMY_T_KEY}", MODE: dev}
    cancel_grace: 2s
  - name: other
    command: ["/bin/true"]
    dir: `+dataDir+`
`)
	getenv := func(k string) string { return map[string]string{"CARMY_T_KEY": "SECRET"}[k] }
	ups, err := fc.mcpUpstreams(quietApp(), getenv, dataDir, slog.New(slog.DiscardHandler))
	if err != nil || len(ups) != 2 {
		t.Fatalf("upstreams %v, %v", ups, err)
	}
	fi, err := os.Stat(filepath.Join(dataDir, "mcp", "local"))
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the default directory: %v, %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "mcp", "other")); !os.IsNotExist(err) {
		t.Fatalf("a directory made for a server with dir: %v", err)
	}
}
