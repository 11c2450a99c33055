package main_test

// Black-box test of upstream MCP servers (docs/mcp.md#carmy-in-front-of-mcp-servers-the-gateway): a built `carmy
// serve` in front of an MCP server over Streamable HTTP (in this test
// process) and one over stdio (testdata of package mcpgateway), driven
// over the API with auth on, and killed with -9 while upstream tools run.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/tests/testutil"
)

const (
	gwQuerySecret  = "gwquery-SECRET-3c9d"
	gwHeaderSecret = "gwheader-SECRET-e5a1"
	gwCallerToken  = "caller-token-SECRET-0123456789"
)

// gwUpstream is an MCP server over HTTP on 127.0.0.1 counting its
// executions by tool and carmy/request_id, and the Authorization headers
// it was sent.
type gwUpstream struct {
	*httptest.Server
	mu    sync.Mutex
	runs  map[string]int
	auths map[string]bool
}

func newGWUpstream(t *testing.T) *gwUpstream {
	t.Helper()
	u := &gwUpstream{runs: make(map[string]int), auths: make(map[string]bool)}
	s := mcp.NewServer(&mcp.Implementation{Name: "bb", Version: "v1"}, nil)
	count := func(tool string, req *mcp.CallToolRequest) int {
		id, _ := req.Params.Meta["carmy/request_id"].(string)
		u.mu.Lock()
		defer u.mu.Unlock()
		u.runs[tool+" "+id]++
		return u.runs[tool+" "+id]
	}
	s.AddTool(&mcp.Tool{Name: "create", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]any{"run": count("create", req)}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			count("block", req)
			<-ctx.Done()
			return nil, ctx.Err()
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auths[r.Header.Get("Authorization")] = true
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		u.CloseClientConnections()
		u.Close()
	})
	return u
}

func (u *gwUpstream) runsOf(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[key]
}

// gwCall posts a call with the caller's token and returns the status,
// the headers and the answer.
func gwCall(t *testing.T, base, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/tools/call", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+gwCallerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", body, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(raw)
}

// gwWaitTools waits until the node lists every tool of names.
func gwWaitTools(t *testing.T, base string, names ...string) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, "the upstream tools listed", func() error {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/tools", nil)
		req.Header.Set("Authorization", "Bearer "+gwCallerToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var list struct{ Tools []struct{ Name string } }
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			return err
		}
		for _, n := range names {
			if !slices.ContainsFunc(list.Tools, func(x struct{ Name string }) bool { return x.Name == n }) {
				return fmt.Errorf("%s not listed: %v", n, list.Tools)
			}
		}
		return nil
	})
}

func TestBlackBoxMCPGateway(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	root := testutil.ModuleRoot(t)
	stdioBin := filepath.Join(t.TempDir(), "stdioserver")
	build := exec.Command("go", "build", "-o", stdioBin, "./mcpgateway/testdata/stdioserver")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build stdioserver: %v\n%s", err, out)
	}
	countFile, pidFile := filepath.Join(t.TempDir(), "count"), filepath.Join(t.TempDir(), "pid")
	remote := newGWUpstream(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	config := fmt.Sprintf(`mcp_servers:
  - name: remote
    url: %s/mcp?token=%s
    headers: {Authorization: "Bearer ${CARMY_BB_MCP_TOKEN}"}
  - name: local
    command: [%q, "-count", %q, "-pid", %q]
    tools: [create, block]
  - name: down
    url: http://%s/mcp
auth:
  tokens:
    - {principal: planner, token_env: CARMY_BB_CALLER, tools: ["*"]}
`, remote.URL, gwQuerySecret, stdioBin, countFile, pidFile, closed)
	path := filepath.Join(t.TempDir(), "carmy.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := testutil.StartOptions{Env: []string{"CARMY_BB_MCP_TOKEN=" + gwHeaderSecret, "CARMY_BB_CALLER=" + gwCallerToken}}
	n := testutil.StartCarmy(t, bin, opts, "--config", path, "--bootstrap")
	n.WaitReady(t, 30*time.Second)
	gwWaitTools(t, n.URL, "remote.create", "remote.block", "local.create", "local.block")

	noSecret := func(what, text string) {
		t.Helper()
		for _, s := range []string{gwQuerySecret, gwHeaderSecret, gwCallerToken, "SECRET"} {
			if strings.Contains(text, s) {
				t.Errorf("%s holds %q: %s", what, s, text)
			}
		}
	}

	// A retry with the same request_id replays, on both upstreams.
	for _, tool := range []string{"remote.create", "local.create"} {
		body := fmt.Sprintf(`{"tool":%q,"arguments":{"sku":"A"},"request_id":"r-%s"}`, tool, tool)
		status, _, first := gwCall(t, n.URL, body)
		var a toolAnswer
		if err := json.Unmarshal([]byte(first), &a); status != http.StatusOK || err != nil || a.Status != "completed" {
			t.Fatalf("%s: %d %s", tool, status, first)
		}
		status, hdr, again := gwCall(t, n.URL, body)
		if status != http.StatusOK || hdr.Get("Idempotent-Replayed") != "true" ||
			again != strings.Replace(first, `"replayed":false`, `"replayed":true`, 1) {
			t.Fatalf("retry of %s: %d %s", tool, status, again)
		}
		noSecret("the answer of "+tool, first)
	}
	if n := remote.runsOf("create r-remote.create"); n != 1 {
		t.Errorf("the HTTP upstream ran create %d times", n)
	}
	if got := lineSet(t, countFile); len(got) != 1 || got[0] != "create r-local.create" {
		t.Errorf("the stdio upstream's executions: %q", got)
	}
	// The caller's token never reached the upstream; the configured one did.
	remote.mu.Lock()
	auths := remote.auths
	remote.mu.Unlock()
	if auths["Bearer "+gwCallerToken] || !auths["Bearer "+gwHeaderSecret] || len(auths) != 1 {
		t.Errorf("the upstream saw Authorization %v", auths)
	}

	// An upstream that cannot be listed: 503 UNAVAILABLE with Retry-After.
	status, hdr, raw := gwCall(t, n.URL, `{"tool":"down.anything","request_id":"d1"}`)
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(raw, `"code":"UNAVAILABLE"`) {
		t.Fatalf("a call of an unlisted upstream: %d %v %s", status, hdr, raw)
	}
	noSecret("the refusal", raw)

	// Killed while both upstreams' tools run: the retries after the
	// restart are EXECUTION_UNCERTAIN, and nothing runs twice.
	var wg sync.WaitGroup
	for _, tool := range []string{"remote.block", "local.block"} {
		wg.Go(func() {
			// The answer never comes: the node is killed meanwhile.
			gwCallNoCheck(n.URL, fmt.Sprintf(`{"tool":%q,"request_id":"k-%s"}`, tool, tool))
		})
	}
	testutil.WaitFor(t, 30*time.Second, "both blocking tools started", func() error {
		if remote.runsOf("block k-remote.block") != 1 || !slices.Contains(lineSet(t, countFile), "block k-local.block") {
			return fmt.Errorf("remote %d, local %q", remote.runsOf("block k-remote.block"), lineSet(t, countFile))
		}
		return nil
	})
	child := readPID(t, pidFile)
	n.Kill()
	wg.Wait()
	waitGone(t, child, "the stdio child of a node killed with -9")
	n = n.Restart(t)
	n.WaitReady(t, 30*time.Second)
	gwWaitTools(t, n.URL, "remote.block", "local.block")
	for _, tool := range []string{"remote.block", "local.block"} {
		status, _, raw := gwCall(t, n.URL, fmt.Sprintf(`{"tool":%q,"request_id":"k-%s"}`, tool, tool))
		if status != http.StatusConflict || !strings.Contains(raw, `"code":"EXECUTION_UNCERTAIN"`) || !strings.Contains(raw, `"status":"interrupted"`) {
			t.Errorf("the retry of %s after kill -9: %d %s", tool, status, raw)
		}
	}
	if r := remote.runsOf("block k-remote.block"); r != 1 {
		t.Errorf("remote.block ran %d times", r)
	}
	if got := lineSet(t, countFile); !slices.Equal(got, []string{"block k-local.block", "create r-local.create"}) {
		t.Errorf("the stdio upstream's executions: %q", got)
	}
	// The stdio server's resources and prompt pass through /mcp, under its
	// prefix (the go-sdk client, 2025-11-25, which opens the GET stream of
	// list_changed notifications and holds it open while the node stops).
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: n.URL + "/mcp",
		HTTPClient: &http.Client{Transport: gwBearer{gwCallerToken}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	testutil.WaitFor(t, 30*time.Second, "local's resource over /mcp", func() error {
		res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "carmy:local/mem://hello"})
		if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != "hello" {
			return fmt.Errorf("resources/read: %v %v", res, err)
		}
		return nil
	})
	if pr, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "local.greet", Arguments: map[string]string{"who": "Di"}}); err != nil ||
		len(pr.Messages) == 0 || pr.Messages[0].Content.(*mcp.TextContent).Text != "Hello Di" {
		t.Errorf("prompts/get local.greet: %v %v", pr, err)
	}
	child = readPID(t, pidFile)
	if err := n.Stop(15 * time.Second); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
	waitGone(t, child, "the stdio child of a node stopped with SIGTERM")
}

// gwBearer adds the caller's bearer token to every request.
type gwBearer struct{ token string }

func (b gwBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// readPID reads the process id the stdio server wrote.
func readPID(t *testing.T, path string) int {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(string(raw))
	if err != nil {
		t.Fatalf("pid file: %q", raw)
	}
	return pid
}

// waitGone waits until the process pid has exited.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	testutil.WaitFor(t, 15*time.Second, what+" exits", func() error {
		if err := syscall.Kill(pid, 0); err != nil {
			return nil
		}
		// An exited child nobody has reaped yet (its parent was killed)
		// is a zombie: gone too.
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if _, after, ok := strings.Cut(string(stat), ") "); ok && strings.HasPrefix(after, "Z") {
				return nil
			}
		}
		return fmt.Errorf("process %d still runs", pid)
	})
}

// gwCallNoCheck posts a call and ignores the answer.
func gwCallNoCheck(base, body string) {
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/tools/call", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+gwCallerToken)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// lineSet returns the sorted lines of a file (none when it does not
// exist).
func lineSet(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for l := range strings.Lines(string(raw)) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}
