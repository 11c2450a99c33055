package embed_test

// Tool effects (docs/policy.md): a node in front of one MCP server,
// entered twice, once with trust_annotations: true and once without.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/tests/testutil"
)

// appliedIndex reads the Raft applied index of GET /v1/cluster.
func appliedIndex(t *testing.T, base string) uint64 {
	t.Helper()
	code, body := httpDo(t, http.MethodGet, base+"/v1/cluster", "", "")
	var v struct {
		AppliedIndex *uint64 `json:"applied_index"`
	}
	if err := json.Unmarshal([]byte(body), &v); code != http.StatusOK || err != nil || v.AppliedIndex == nil {
		t.Fatalf("GET /v1/cluster: %d %s (%v)", code, body, err)
	}
	return *v.AppliedIndex
}

// waitTools waits until GET /v1/tools (with token, unless empty) lists
// every one of names.
func waitTools(t *testing.T, base, token string, names ...string) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, "the upstream tools listed", func() error {
		code, body := httpDo(t, http.MethodGet, base+"/v1/tools", token, "")
		var list struct{ Tools []struct{ Name string } }
		if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil {
			return fmt.Errorf("GET /v1/tools: %d %s (%v)", code, body, err)
		}
		for _, n := range names {
			if !slices.ContainsFunc(list.Tools, func(x struct{ Name string }) bool { return x.Name == n }) {
				return fmt.Errorf("%s not listed: %v", n, list.Tools)
			}
		}
		return nil
	})
}

// TestEffectsFromAnnotations: a tool whose upstream says readOnlyHint is
// read-only only when its server entry trusts the annotations: then its
// calls, request_id or not, write nothing to the Raft log (the applied
// index does not move) and answer "recorded": false; untrusted, the same
// annotation changes nothing: called twice with one request_id, the tool
// ran once.
func TestEffectsFromAnnotations(t *testing.T) {
	t.Parallel() // a node of its own on ports the kernel picks
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

	base, _ := startFromYAML(t, fmt.Sprintf(`mcp_servers:
  - name: trusted
    url: %s
    trust_annotations: true
  - name: untrusted
    url: %s
`, up.URL, up.URL))
	waitTools(t, base, "", "trusted.wipe", "untrusted.wipe")

	callTool := func(body string) map[string]any {
		t.Helper()
		code, raw := httpDo(t, http.MethodPost, base+"/v1/tools/call", "", body)
		var a map[string]any
		if err := json.Unmarshal([]byte(raw), &a); err != nil || code != http.StatusOK || a["status"] != "completed" {
			t.Fatalf("POST %s: %d %v (%v)", body, code, a, err)
		}
		return a
	}

	// The log is quiet once the node has started: wait for two equal reads.
	var before uint64
	testutil.WaitFor(t, 30*time.Second, "a quiet log", func() error {
		a := appliedIndex(t, base)
		if b := appliedIndex(t, base); a != b {
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
	if after := appliedIndex(t, base); after != before {
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
	if after := appliedIndex(t, base); after <= before {
		t.Fatalf("applied index %d after a recorded call, %d before: the control did not write", after, before)
	}
}
