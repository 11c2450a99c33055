package docs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// clientToken is the token the node of TestClientConfigs requires.
const clientToken = "client-configs-test-token-0123456789"

// clientConfig is what an MCP client would send, read from its file.
type clientConfig struct {
	url     string
	headers map[string]string
}

// TestClientConfigs reads each MCP client's file in examples/agent/clients
// (and the agent SDK's examples/agent/frameworks/claude-mcp-servers.json)
// as that client would — the URL and headers, its way of naming the token
// filled in — and makes an MCP initialize and tools/list with them against
// a node whose URL replaces the file's and which requires the token. The
// same requests without the file's headers must be refused (401), so the
// headers are what lets the client in.
func TestClientConfigs(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: builds and runs the carmy binary")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "examples", "agent", "clients", "*.json"))
	if err != nil || len(files) < 4 {
		t.Fatalf("examples/agent/clients holds %d JSON files (%v); want one per client", len(files), err)
	}
	files = append(files, filepath.Join(root, "examples", "agent", "frameworks", "claude-mcp-servers.json"))
	bin := testutil.BuildCarmy(t)
	dir := t.TempDir()
	config := "demo_tools: true\nauth:\n  tokens:\n    - {principal: agent, token_env: CLIENT_TOKEN}\n"
	if err := os.WriteFile(filepath.Join(dir, "carmy.yaml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{Env: []string{"CLIENT_TOKEN=" + clientToken}},
		"--config", filepath.Join(dir, "carmy.yaml"), "--bootstrap")
	n.WaitReady(t, 30*time.Second)

	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			cfg, err := readClientConfig(file)
			if err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(cfg.url)
			if err != nil || u.Path != "/mcp" || u.Host != "127.0.0.1:8080" {
				t.Fatalf("url %q: want http://127.0.0.1:8080/mcp, the default node's (%v)", cfg.url, err)
			}
			endpoint := n.URL + u.Path
			if code, _ := mcpRequest(t, endpoint, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); code != http.StatusUnauthorized {
				t.Fatalf("tools/list without the file's headers: %d, want 401", code)
			}
			code, body := mcpRequest(t, endpoint, cfg.headers, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"client-configs-test","version":"1"}}}`)
			if code != http.StatusOK || !strings.Contains(body, `"serverInfo"`) {
				t.Fatalf("initialize with headers %v: %d %s", cfg.headers, code, body)
			}
			code, body = mcpRequest(t, endpoint, cfg.headers, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			if code != http.StatusOK || !strings.Contains(body, `"name":"create_order"`) {
				t.Fatalf("tools/list with headers %v: %d %s", cfg.headers, code, body)
			}
		})
	}
}

// mcpRequest posts one JSON-RPC message to the endpoint as a Streamable
// HTTP client does, with headers, and returns the status and body.
func mcpRequest(t *testing.T, endpoint string, headers map[string]string, msg string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// clientVars are the ways the files name the token, each as its client
// fills it in: Claude Code's ${VAR} from the environment, Cursor's
// ${env:VAR}, VS Code's ${input:id} (asked of the user), and the bridge's
// ${VAR} from the env block of Claude Desktop's entry.
var clientVar = regexp.MustCompile(`\$\{(env:|input:)?([A-Za-z0-9_-]+)\}`)

// readClientConfig reads a client's file: an "mcpServers" (Claude Code,
// Claude Desktop, Cursor) or "servers" (VS Code) object holding "carmy",
// which has "url" and "headers", or (Claude Desktop) a bridge command
// whose arguments hold the URL and --header NAME:VALUE.
func readClientConfig(path string) (clientConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return clientConfig{}, err
	}
	var file struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
		Servers    map[string]json.RawMessage `json:"servers"`
		Inputs     []struct {
			Type        string `json:"type"`
			ID          string `json:"id"`
			Description string `json:"description"`
			Password    bool   `json:"password"`
		} `json:"inputs"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return clientConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	raw := file.MCPServers["carmy"]
	if raw == nil {
		raw = file.Servers["carmy"]
	}
	if raw == nil {
		return clientConfig{}, fmt.Errorf("%s: no server named carmy under mcpServers or servers", path)
	}
	var server struct {
		Type    string            `json:"type"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	}
	dec = json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&server); err != nil {
		return clientConfig{}, fmt.Errorf("%s: the carmy entry: %w", path, err)
	}
	inputs := map[string]bool{}
	for _, in := range file.Inputs {
		inputs[in.ID] = in.Password
	}
	var fillErr error
	fill := func(s string) string {
		return clientVar.ReplaceAllStringFunc(s, func(m string) string {
			sub := clientVar.FindStringSubmatch(m)
			switch {
			case sub[1] == "input:":
				if password, ok := inputs[sub[2]]; !ok || !password {
					fillErr = fmt.Errorf("%s: ${input:%s} is not a password input of the file", path, sub[2])
				}
				return clientToken
			case server.Env[sub[2]] != "":
				return strings.ReplaceAll(server.Env[sub[2]], "<your Carmy token>", clientToken)
			case sub[2] == "CARMY_TOKEN":
				return clientToken
			}
			fillErr = fmt.Errorf("%s: %s names nothing the client would fill in", path, m)
			return m
		})
	}
	cfg := clientConfig{url: server.URL, headers: map[string]string{}}
	for k, v := range server.Headers {
		cfg.headers[k] = fill(v)
	}
	if server.Command != "" { // a stdio bridge: npx -y mcp-remote URL --header NAME:VALUE
		for i := 0; i < len(server.Args); i++ {
			a := server.Args[i]
			switch {
			case strings.HasPrefix(a, "http://") || strings.HasPrefix(a, "https://"):
				cfg.url = a
			case a == "--header" && i+1 < len(server.Args):
				i++
				name, value, ok := strings.Cut(fill(server.Args[i]), ":")
				if !ok {
					return cfg, fmt.Errorf("%s: --header %q: want NAME:VALUE", path, server.Args[i])
				}
				cfg.headers[name] = strings.TrimSpace(value)
			}
		}
	}
	if fillErr != nil {
		return cfg, fillErr
	}
	if cfg.url == "" {
		return cfg, fmt.Errorf("%s: no URL", path)
	}
	if server.Type != "" && server.Type != "http" {
		return cfg, fmt.Errorf("%s: type %q: Carmy serves Streamable HTTP (\"http\")", path, server.Type)
	}
	return cfg, nil
}
