package embed_test

// The dedupe window (docs/mcp.md#calls-without-a-request-id-dedupe_window):
// a node with an HTTP tool and an upstream MCP server that declare one.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/api/client"
)

// dedupeCaller is the token of the dedupe test's caller.
const dedupeCaller = "caller-token-SECRET-0123456789"

// postCall posts a call as the dedupe test's caller and returns the
// status, the headers and the raw answer.
func postCall(t *testing.T, base, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/tools/call", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+dedupeCaller)
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

// TestDedupeWindow: calls without a request_id to a tool with a
// dedupe_window (an HTTP tool, an upstream MCP server's) get a derived
// request_id ("~" and 32 characters); the same call again within the
// window replays (Idempotent-Replayed: true, the same answer), the tool
// having run once, and the agent finds the call by the derived
// request_id. A client's request_id may not begin with "~", and
// require_request_id wins over the window.
func TestDedupeWindow(t *testing.T) {
	t.Parallel() // a node of its own on ports the kernel picks
	var (
		mu         sync.Mutex
		httpRuns   int
		createRuns = map[string]int{}
	)
	orders := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		httpRuns++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(orders.Close)
	s := mcp.NewServer(&mcp.Implementation{Name: "bb", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "create", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			id, _ := req.Params.Meta["carmy/request_id"].(string)
			mu.Lock()
			defer mu.Unlock()
			createRuns[id]++
			return &mcp.CallToolResult{StructuredContent: map[string]any{"run": createRuns[id]}}, nil
		})
	remote := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() {
		remote.CloseClientConnections()
		remote.Close()
	})
	config := fmt.Sprintf(`tools:
  - name: orders
    dedupe_window: 10m
    http: {url: %s/orders}
  - name: strict
    dedupe_window: 10m
    require_request_id: true
    http: {url: %s/orders}
mcp_servers:
  - name: remote
    url: %s/mcp
    dedupe_window: 10m
auth:
  tokens:
    - {principal: planner, token_env: CARMY_BB_CALLER, tools: ["*"]}
`, orders.URL, orders.URL, remote.URL)
	base, _ := startFromYAML(t, config, withEnv(map[string]string{"CARMY_BB_CALLER": dedupeCaller}))
	waitTools(t, base, dedupeCaller, "remote.create")
	api, err := client.New(base, client.WithRetry(client.NoRetry), client.WithToken(dedupeCaller),
		client.WithHTTPClient(&http.Client{Timeout: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}

	type answer struct {
		ExecutionID string `json:"execution_id"`
		RequestID   string `json:"request_id"`
		Replayed    bool   `json:"replayed"`
	}
	for _, tool := range []string{"orders", "remote.create"} {
		body := fmt.Sprintf(`{"tool":%q,"arguments":{"sku":"A"},"session_id":"s1"}`, tool)
		status, _, raw := postCall(t, base, body)
		var first answer
		if err := json.Unmarshal([]byte(raw), &first); status != http.StatusOK || err != nil || !strings.HasPrefix(first.RequestID, "~") || len(first.RequestID) != 33 || first.Replayed {
			t.Fatalf("%s without request_id: %d %s", tool, status, raw)
		}
		status, hdr, again := postCall(t, base, body)
		if status != http.StatusOK || hdr.Get("Idempotent-Replayed") != "true" || again != strings.Replace(raw, `"replayed":false`, `"replayed":true`, 1) {
			t.Fatalf("%s again: %d %s, want the replay of %s", tool, status, again, raw)
		}
		// The agent looks the call up by the derived request_id.
		rec, err := api.Lookup(t.Context(), first.RequestID, "s1")
		if err != nil || rec.ExecutionID != first.ExecutionID {
			t.Fatalf("lookup of %s by %s: %+v, %v", tool, first.RequestID, rec, err)
		}
	}
	mu.Lock()
	runs := 0
	for k, v := range createRuns {
		if strings.HasPrefix(k, "~") {
			runs += v
		}
	}
	gotHTTP := httpRuns
	mu.Unlock()
	if gotHTTP != 1 {
		t.Errorf("the HTTP tool's upstream got %d requests, want 1", gotHTTP)
	}
	if runs != 1 {
		t.Errorf("the MCP upstream ran create %d times, want 1", runs)
	}

	// A client request_id may not begin with "~"; require_request_id wins.
	for body, field := range map[string]string{
		`{"tool":"orders","request_id":"~mine"}`: "request_id",
		`{"tool":"strict"}`:                      "request_id",
	} {
		status, _, raw := postCall(t, base, body)
		if status != http.StatusBadRequest || !strings.Contains(raw, `"code":"INVALID_REQUEST"`) || !strings.Contains(raw, `"field":"`+field+`"`) {
			t.Errorf("%s: %d %s, want 400 INVALID_REQUEST on %s", body, status, raw, field)
		}
	}
}
