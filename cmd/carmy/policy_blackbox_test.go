package main_test

// Black-box test of tool effects (docs/policy.md): a built `carmy serve`
// in front of one MCP server, entered twice, once with
// trust_annotations: true and once without.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/tests/testutil"
)

// appliedIndex reads the Raft applied index of GET /v1/cluster.
func appliedIndex(t *testing.T, base string) uint64 {
	t.Helper()
	code, body := bbGet(t, base+"/v1/cluster")
	var v struct {
		AppliedIndex *uint64 `json:"applied_index"`
	}
	if err := json.Unmarshal([]byte(body), &v); code != http.StatusOK || err != nil || v.AppliedIndex == nil {
		t.Fatalf("GET /v1/cluster: %d %s (%v)", code, body, err)
	}
	return *v.AppliedIndex
}

// TestBlackBoxEffectsFromAnnotations: a tool whose upstream says
// readOnlyHint is read-only only when its server entry trusts the
// annotations: then its calls, request_id or not, write nothing to the
// Raft log (the applied index does not move) and answer "recorded":
// false; untrusted, the same annotation changes nothing: called twice
// with one request_id, the tool ran once.
func TestBlackBoxEffectsFromAnnotations(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	var mu sync.Mutex
	runs := map[string]int{}
	s := mcp.NewServer(&mcp.Implementation{Name: "policy", Version: "v1"}, nil)
	// wipe is destructive and claims to be read-only: only trust makes
	// Carmy believe it.
	s.AddTool(&mcp.Tool{Name: "wipe", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			id, _ := req.Params.Meta["carmy/request_id"].(string)
			mu.Lock()
			defer mu.Unlock()
			runs[id]++
			return &mcp.CallToolResult{StructuredContent: map[string]any{"run": runs[id]}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	up := httptest.NewServer(h)
	t.Cleanup(func() {
		up.CloseClientConnections()
		up.Close()
	})
	runsOf := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		return runs[id]
	}

	config := fmt.Sprintf(`mcp_servers:
  - name: trusted
    url: %s
    trust_annotations: true
  - name: untrusted
    url: %s
`, up.URL, up.URL)
	path := filepath.Join(t.TempDir(), "carmy.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{}, "--config", path, "--bootstrap")
	n.WaitReady(t, 30*time.Second)
	gwWaitTools(t, n.URL, "trusted.wipe", "untrusted.wipe")

	callTool := func(body string) map[string]any {
		t.Helper()
		resp, err := http.Post(n.URL+"/v1/tools/call", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK || a["status"] != "completed" {
			t.Fatalf("POST %s: %d %v (%v)", body, resp.StatusCode, a, err)
		}
		return a
	}

	// The log is quiet once the node has started: wait for two equal reads.
	var before uint64
	testutil.WaitFor(t, 30*time.Second, "a quiet log", func() error {
		a := appliedIndex(t, n.URL)
		if b := appliedIndex(t, n.URL); a != b {
			return fmt.Errorf("applied index moving: %d then %d", a, b)
		}
		before = a
		return nil
	})

	// Trusted: read-only, twice with one request_id and once without.
	for i, body := range []string{
		`{"tool":"trusted.wipe","request_id":"t1"}`, `{"tool":"trusted.wipe","request_id":"t1"}`, `{"tool":"trusted.wipe"}`,
	} {
		if a := callTool(body); a["recorded"] != false || a["replayed"] != false {
			t.Fatalf("trusted call %d: %v, want recorded false and not replayed", i, a)
		}
	}
	if got := runsOf("t1"); got != 2 {
		t.Fatalf("trusted.wipe with request_id t1 ran %d times, want 2 (nothing recorded)", got)
	}
	if after := appliedIndex(t, n.URL); after != before {
		t.Fatalf("applied index %d before the read-only calls, %d after: they wrote to the log", before, after)
	}

	// Untrusted: the annotation changes nothing; recorded and replayed.
	first := callTool(`{"tool":"untrusted.wipe","request_id":"u1"}`)
	again := callTool(`{"tool":"untrusted.wipe","request_id":"u1"}`)
	if _, ok := first["recorded"]; ok || again["replayed"] != true || again["execution_id"] != first["execution_id"] {
		t.Fatalf("untrusted: first %v, again %v", first, again)
	}
	if got := runsOf("u1"); got != 1 {
		t.Fatalf("untrusted.wipe with request_id u1 ran %d times, want 1", got)
	}
	if after := appliedIndex(t, n.URL); after <= before {
		t.Fatalf("applied index %d after a recorded call, %d before: the control did not write", after, before)
	}
}
