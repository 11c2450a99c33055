package main_test

// Black-box test of the dedupe window (docs/mcp.md#calls-without-a-request-id-dedupe_window): a built `carmy serve`
// with an HTTP tool and an upstream MCP server that declare one.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

func TestBlackBoxDedupeWindow(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	orders := startUpstream(t, nil, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})
	remote := newGWUpstream(t)
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
	path := filepath.Join(t.TempDir(), "carmy.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{Env: []string{"CARMY_BB_CALLER=" + gwCallerToken}}, "--config", path, "--bootstrap")
	n.WaitReady(t, 30*time.Second)
	gwWaitTools(t, n.URL, "remote.create")

	type answer struct {
		ExecutionID string `json:"execution_id"`
		RequestID   string `json:"request_id"`
		Replayed    bool   `json:"replayed"`
	}
	for _, tool := range []string{"orders", "remote.create"} {
		body := fmt.Sprintf(`{"tool":%q,"arguments":{"sku":"A"},"session_id":"s1"}`, tool)
		status, _, raw := gwCall(t, n.URL, body)
		var first answer
		if err := json.Unmarshal([]byte(raw), &first); status != http.StatusOK || err != nil || !strings.HasPrefix(first.RequestID, "~") || len(first.RequestID) != 33 || first.Replayed {
			t.Fatalf("%s without request_id: %d %s", tool, status, raw)
		}
		status, hdr, again := gwCall(t, n.URL, body)
		if status != http.StatusOK || hdr.Get("Idempotent-Replayed") != "true" || again != strings.Replace(raw, `"replayed":false`, `"replayed":true`, 1) {
			t.Fatalf("%s again: %d %s, want the replay of %s", tool, status, again, raw)
		}
		// The agent looks the call up by the derived request_id.
		rec, err := apiClient(t, n.URL, gwCallerToken).Lookup(t.Context(), first.RequestID, "s1")
		if err != nil || rec.ExecutionID != first.ExecutionID {
			t.Fatalf("lookup of %s by %s: %+v, %v", tool, first.RequestID, rec, err)
		}
	}
	if got := orders.requests.Load(); got != 1 {
		t.Errorf("the HTTP tool's upstream got %d requests, want 1", got)
	}
	remote.mu.Lock()
	runs := 0
	for k, v := range remote.runs {
		if strings.HasPrefix(k, "create ~") {
			runs += v
		}
	}
	remote.mu.Unlock()
	if runs != 1 {
		t.Errorf("the MCP upstream ran create %d times, want 1", runs)
	}

	// A client request_id may not begin with "~"; require_request_id wins.
	for body, field := range map[string]string{
		`{"tool":"orders","request_id":"~mine"}`: "request_id",
		`{"tool":"strict"}`:                      "request_id",
	} {
		status, _, raw := gwCall(t, n.URL, body)
		if status != http.StatusBadRequest || !strings.Contains(raw, `"code":"INVALID_REQUEST"`) || !strings.Contains(raw, `"field":"`+field+`"`) {
			t.Errorf("%s: %d %s, want 400 INVALID_REQUEST on %s", body, status, raw, field)
		}
	}
}
