package main_test

// Helpers of the black-box approval test (approval_blackbox_test.go): the
// principals' tokens, an HTTP upstream counting runs by request_id, an MCP
// upstream whose one tool carries annotations, and requests that report
// rather than fail, for goroutines.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/internal/mcpclient"
	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/tests/testutil"
)

// The approval test's tokens (at least 16 bytes each).
const (
	apAlice = "alice-token-0123456789abcdef"
	apBob   = "bob-token-0123456789abcdefgh"
	apCarol = "carol-token-0123456789abcdef"
	apAdmin = "admin-token-0123456789abcdef"
)

// apEnv is the environment the config's token_env names read.
var apEnv = []string{"AP_ALICE=" + apAlice, "AP_BOB=" + apBob, "AP_CAROL=" + apCarol, "AP_ADMIN=" + apAdmin}

// apCounter is an HTTP upstream counting its requests by the
// Carmy-Request-Id header; a request whose id begins with "slow-" is
// answered after slowFor, one whose id begins with "hang-" never (until
// its client goes away).
type apCounter struct {
	*httptest.Server
	mu   sync.Mutex
	runs map[string]int
}

func newAPCounter(t *testing.T, slowFor time.Duration) *apCounter {
	t.Helper()
	u := &apCounter{runs: map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Carmy-Request-Id")
		// Read to the end, so that the server notices its client going
		// away (and ends r's context) while a hang- request waits.
		io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.runs[id]++
		n := u.runs[id]
		u.mu.Unlock()
		if strings.HasPrefix(id, "hang-") {
			<-r.Context().Done()
			return
		}
		if strings.HasPrefix(id, "slow-") {
			select {
			case <-time.After(slowFor):
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"paid":%q,"run":%d}`, id, n)
	}))
	t.Cleanup(u.Close)
	return u
}

// runsOf returns how many requests of request_id id the upstream got.
func (u *apCounter) runsOf(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[id]
}

// newAnnotatedUpstream serves an MCP server over HTTP whose one tool,
// wipe, says it is read-only and destructive at once; runs counts its
// executions by carmy/request_id.
func newAnnotatedUpstream(t *testing.T) (*httptest.Server, func(id string) int) {
	t.Helper()
	var mu sync.Mutex
	runs := map[string]int{}
	destructive := true
	s := mcp.NewServer(&mcp.Implementation{Name: "annotated", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "wipe", InputSchema: json.RawMessage(`{"type":"object"}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &destructive}},
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
	return up, func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		return runs[id]
	}
}

// apAnswer is an answer of the API: its status and body, and the body
// decoded as far as these tests read it.
type apAnswer struct {
	Code int
	Raw  string
	V    struct {
		ExecutionID string `json:"execution_id"`
		Status      string `json:"status"`
		NodeID      string `json:"node_id"`
		Replayed    bool   `json:"replayed"`
		Recorded    *bool  `json:"recorded"`
		Data        json.RawMessage
		Approval    *struct {
			Approvers []string `json:"approvers"`
			ExpiresAt string   `json:"expires_at"`
			Decision  *struct {
				Status string `json:"status"`
				By     string `json:"by"`
			} `json:"decision"`
		} `json:"approval"`
		Error struct {
			Code        string `json:"code"`
			Status      string `json:"status"`
			ExecutionID string `json:"execution_id"`
		} `json:"error"`
	}
}

func (a apAnswer) String() string { return fmt.Sprintf("%d %s", a.Code, a.Raw) }

var apHTTP = &http.Client{Timeout: time.Minute}

// apDo sends a request to the API as token and returns the answer; it
// reports rather than fails, so goroutines may call it.
func apDo(method, url, token, body string) (apAnswer, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return apAnswer{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := apHTTP.Do(req)
	if err != nil {
		return apAnswer{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return apAnswer{}, fmt.Errorf("%s %s: %w", method, url, err)
	}
	a := apAnswer{Code: resp.StatusCode, Raw: string(raw)}
	if err := json.Unmarshal(raw, &a.V); err != nil {
		return a, fmt.Errorf("%s %s: %d, not JSON: %w: %s", method, url, resp.StatusCode, err, raw)
	}
	return a, nil
}

// apMust is apDo failing the test on an error.
func apMust(t *testing.T, method, url, token, body string) apAnswer {
	t.Helper()
	a, err := apDo(method, url, token, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// apCall calls tool as alice with request_id rid on node n.
func apCall(t *testing.T, n *testutil.Node, tool, rid string) apAnswer {
	t.Helper()
	return apMust(t, http.MethodPost, n.URL+"/v1/tools/call", apAlice,
		fmt.Sprintf(`{"tool":%q,"arguments":{"amount":5},"request_id":%q}`, tool, rid))
}

// apDecide posts a decision ("approve" or "deny") on execution id at node
// n as token.
func apDecide(n *testutil.Node, token, id, kind string) (apAnswer, error) {
	return apDo(http.MethodPost, n.URL+"/v1/executions/"+id+"/"+kind, token, "")
}

// apAwaiting checks that a is the 202 of a call awaiting bob's approval;
// for a retry (first not nil), the very answer first was.
func apAwaiting(t *testing.T, what string, a apAnswer, first *apAnswer) {
	t.Helper()
	if a.Code != http.StatusAccepted || a.V.Status != "awaiting_approval" || a.V.ExecutionID == "" || a.V.Replayed ||
		a.V.Approval == nil || !slices.Equal(a.V.Approval.Approvers, []string{"bob"}) {
		t.Fatalf("%s: %s; want 202 awaiting_approval with bob as approver", what, a)
	}
	if first != nil && a.Raw != first.Raw {
		t.Fatalf("%s: %s; want the same answer as the first call's: %s", what, a, first)
	}
}

// apReplayed checks that a is the replay of execution id's outcome:
// status, with error code (or, when code is "", the data want).
func apReplayed(t *testing.T, what string, a apAnswer, id, status, code string, want json.RawMessage) {
	t.Helper()
	if a.Code != http.StatusOK || !a.V.Replayed || a.V.ExecutionID != id || a.V.Status != status || a.V.Error.Code != code ||
		(code == "" && string(a.V.Data) != string(want)) {
		t.Fatalf("%s: %s; want 200, the replay of %s (%s %s %s)", what, a, id, status, code, want)
	}
}

// apWaitAppliedQuiet waits until every node reports one Raft applied
// index, twice in a row, and returns it.
func apWaitAppliedQuiet(t *testing.T, nodes []*testutil.Node) uint64 {
	t.Helper()
	var index uint64
	testutil.WaitFor(t, 30*time.Second, "a quiet Raft log, applied alike on every node", func() error {
		var seen []uint64
		for range 2 {
			for _, n := range nodes {
				seen = append(seen, apAppliedIndex(t, n))
			}
		}
		for _, s := range seen {
			if s != seen[0] {
				return fmt.Errorf("applied indexes %v", seen)
			}
		}
		index = seen[0]
		return nil
	})
	return index
}

// apRestartArgs are a member's arguments for a restart from its data dir:
// without --join and --bootstrap.
func apRestartArgs(n *testutil.Node) []string {
	return slices.DeleteFunc(testutil.WithoutFlag(n.Args(), "--join"), func(a string) bool { return a == "--bootstrap" })
}

// apAppliedIndex reads the Raft applied index of n's GET /v1/cluster, as
// the admin.
func apAppliedIndex(t *testing.T, n *testutil.Node) uint64 {
	t.Helper()
	a := apMust(t, http.MethodGet, n.URL+"/v1/cluster", apAdmin, "")
	var v struct {
		AppliedIndex *uint64 `json:"applied_index"`
	}
	if err := json.Unmarshal([]byte(a.Raw), &v); a.Code != http.StatusOK || err != nil || v.AppliedIndex == nil {
		t.Fatalf("GET /v1/cluster of %s: %s (%v)", n.ID(), a, err)
	}
	return *v.AppliedIndex
}

// apMCP posts one JSON-RPC message to n's /mcp as alice at 2025-11-25
// and returns the decoded answer.
// (2025-11-25 requests name no method in a header.)
func apMCP(t *testing.T, n *testutil.Node, body string) map[string]any {
	t.Helper()
	c := mcpclient.Client{HTTP: apHTTP, URL: n.URL + "/mcp", Version: mcpversion.V20251125, Token: apAlice}
	a, err := c.Post(t.Context(), "", "", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := a.Decode(&out); err != nil {
		t.Fatalf("POST /mcp on %s: %v", n.URL, err)
	}
	return out
}

// apResultOf returns a JSON-RPC answer's result, failing on anything else.
func apResultOf(t *testing.T, what string, msg map[string]any) map[string]any {
	t.Helper()
	r, ok := msg["result"].(map[string]any)
	if !ok {
		t.Fatalf("%s: %v, want a result", what, msg)
	}
	return r
}

// apTaskOf returns the task of a tools/call answered with one.
func apTaskOf(t *testing.T, what string, msg map[string]any) map[string]any {
	t.Helper()
	tk, ok := apResultOf(t, what, msg)["task"].(map[string]any)
	if !ok {
		t.Fatalf("%s: %v, want a task", what, msg)
	}
	return tk
}
