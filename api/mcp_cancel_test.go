package api_test

// Tests of what ends a tools/call at /mcp whose client goes away before
// the answer: the official Go SDK's cancel (the POST aborted, then
// notifications/cancelled), and a response stream closed by the client,
// which cancels at 2026-07-28 only (docs/mcp.md, Cancelling).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/internal/mcpversion"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// holdTool is a tool that runs until the test releases its key (its
// argument "key") or its context ends, and says which of its calls
// started and which saw their context end.
type holdTool struct {
	started, ended chan string // keys
	mu             sync.Mutex
	release        map[string]chan struct{}
}

func newHoldTool() *holdTool {
	return &holdTool{started: make(chan string, 16), ended: make(chan string, 16), release: map[string]chan struct{}{}}
}

// releaseOf is the channel that lets key's call finish.
func (h *holdTool) releaseOf(key string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch, ok := h.release[key]
	if !ok {
		ch = make(chan struct{})
		h.release[key] = ch
	}
	return ch
}

func (h *holdTool) spec() carmy.ToolSpec {
	return carmy.ToolSpec{
		Name:        "hold",
		Description: "Runs until the test releases its key or its context ends.",
		InputSchema: json.RawMessage(`{"type":"object","required":["key"],"properties":{"key":{"type":"string"}}}`),
		Timeout:     time.Minute,
		Func: func(ctx context.Context, call carmy.Call) (any, error) {
			var in struct{ Key string }
			if err := json.Unmarshal(call.Arguments, &in); err != nil {
				return nil, err
			}
			h.started <- in.Key
			select {
			case <-h.releaseOf(in.Key):
				return map[string]any{"released": in.Key}, nil
			case <-ctx.Done():
				h.ended <- in.Key
				return nil, ctx.Err()
			}
		},
	}
}

// awaitKey waits for key on ch.
func awaitKey(t *testing.T, ch <-chan string, key, what string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case k := <-ch:
			if k == key {
				return
			}
		case <-deadline:
			t.Fatalf("%s %q: not within 30 s", what, key)
		}
	}
}

// statusOf is the status of the record of requestID (the session ""), ""
// while there is none.
func statusOf(t *testing.T, base, requestID string) string {
	t.Helper()
	resp, err := http.Get(base + "/v1/executions?request_id=" + requestID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rec struct{ Status string }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&rec) != nil {
		return ""
	}
	return rec.Status
}

// awaitStatus waits until the record of requestID has finished, and
// fails unless it is want.
func awaitStatus(t *testing.T, base, requestID, want string) {
	t.Helper()
	var got string
	wait.Until(t, 30*time.Second, "the execution of "+requestID+" to finish", func() bool {
		got = statusOf(t, base, requestID)
		return got != "" && got != "running"
	})
	if got != want {
		t.Errorf("the execution of %s ended %q, want %q", requestID, got, want)
	}
}

// mcpCallsEnded is how many tools/calls at /mcp the node has answered or
// given up on (carmy_calls_total of transport mcp): a call's handler
// counts it when it returns.
func mcpCallsEnded(t *testing.T, base string) float64 {
	t.Helper()
	n := 0.0
	for k, v := range scrapeURL(t, base) {
		if strings.HasPrefix(k, "carmy_calls_total{") && strings.Contains(k, `transport="mcp"`) {
			n += v
		}
	}
	return n
}

// TestMCPGoSDKCancelCancels: a go-sdk v1.8.0 client whose call's context
// is cancelled aborts the POST, then sends notifications/cancelled; at
// every version the execution ends cancelled and the tool sees its
// context end (at 2026-07-28 the closed stream alone would do).
func TestMCPGoSDKCancelCancels(t *testing.T) {
	hold := newHoldTool()
	_, base := startOASNode(t, api.Config{}, hold.spec())
	for _, version := range mcpversion.Versions(func(f mcpversion.Features) bool { return !f.Batches }) {
		t.Run(version, func(t *testing.T) {
			key := "gosdk-" + version
			client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "v1"}, nil)
			cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: base + "/mcp", DisableStandaloneSSE: true},
				&sdk.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %s, want %s", got, version)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "hold", Arguments: map[string]any{"key": key},
					Meta: sdk.Meta{"carmy/request_id": key}})
				done <- err
			}()
			awaitKey(t, hold.started, key, "the tool to start")
			cancel()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("the cancelled call answered")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("CallTool did not return after its context was cancelled")
			}
			awaitKey(t, hold.ended, key, "the tool's context to end")
			awaitStatus(t, base, key, "cancelled")
		})
	}
}

// TestMCPClosedStream: a raw client that closes the response stream of a
// tools/call before the answer cancels the execution at 2026-07-28 (on
// the fast path, through the SDK, and on an event stream of progress),
// and does not at 2025-06-18, whose tool runs on and completes.
func TestMCPClosedStream(t *testing.T) {
	hold := newHoldTool()
	_, base := startOASNode(t, api.Config{}, hold.spec())
	const meta0728 = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	for _, tc := range []struct {
		name, version, meta, want string
	}{
		{"2026-07-28 fast path", v0728, meta0728, "cancelled"},
		// Another io.modelcontextprotocol/ key leaves the call to the SDK.
		{"2026-07-28 SDK", v0728, meta0728 + `,"io.modelcontextprotocol/other":1`, "cancelled"},
		{"2026-07-28 progress", v0728, meta0728 + `,"progressToken":"p"`, "cancelled"},
		{"2025-06-18", "2025-06-18", `"carmy/x":1`, "completed"},
		{"2025-06-18 progress", "2025-06-18", `"progressToken":"p"`, "completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.ReplaceAll("closed-"+tc.name, " ", "-")
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hold","arguments":{"key":%q},"_meta":{"carmy/request_id":%q,%s}}}`,
				key, key, tc.meta)
			ctx, closeStream := context.WithCancel(t.Context())
			defer closeStream()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", tc.version)
			if tc.version == v0728 {
				req.Header.Set("Mcp-Method", "tools/call")
				req.Header.Set("Mcp-Name", "hold")
			}
			ended := mcpCallsEnded(t, base)
			answered := make(chan string, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					answered <- ""
					return
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				answered <- string(raw)
			}()
			awaitKey(t, hold.started, key, "the tool to start")
			closeStream()
			if a := <-answered; strings.Contains(a, `"result"`) {
				t.Fatalf("answered before the stream closed: %s", a)
			}
			// The node gives up on the call once it sees the stream closed.
			wait.Until(t, 30*time.Second, "the node to give up on the call", func() bool { return mcpCallsEnded(t, base) > ended })
			if tc.want == "completed" {
				close(hold.releaseOf(key))
			} else {
				awaitKey(t, hold.ended, key, "the tool's context to end")
			}
			awaitStatus(t, base, key, tc.want)
		})
	}
}
