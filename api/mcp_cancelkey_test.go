package api_test

// Tests of whose call a notifications/cancelled cancels: only a call of
// the same sender — the same principal, Carmy session and MCP transport
// session (Mcp-Session-Id), at a protocol version of the same kind
// (docs/mcp.md, Cancelling). Every client numbers its JSON-RPC ids from
// 1, so the id alone names a call of every client at once.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/api"
)

// TestMCPCancelOtherClient: two go-sdk clients of one principal and one
// Carmy session ("") call a tool, each with its first tools/call (the
// same JSON-RPC id); the one whose context is cancelled aborts its POST
// and sends notifications/cancelled, which cancels its own call only:
// the other's runs on and completes.
func TestMCPCancelOtherClient(t *testing.T) {
	hold := newHoldTool()
	_, base := startOASNode(t, api.Config{}, hold.spec())
	for _, version := range []string{"2025-11-25", "2025-06-18"} {
		t.Run(version, func(t *testing.T) {
			connect := func() *sdk.ClientSession {
				client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "v1"}, nil)
				cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: base + "/mcp", DisableStandaloneSSE: true},
					&sdk.ClientSessionOptions{ProtocolVersion: version})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cs.Close() })
				if cs.ID() == "" {
					t.Fatal("initialize assigned no transport session (Mcp-Session-Id)")
				}
				return cs
			}
			type outcome struct {
				res *sdk.CallToolResult
				err error
			}
			call := func(ctx context.Context, cs *sdk.ClientSession, key string) <-chan outcome {
				done := make(chan outcome, 1)
				go func() {
					res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "hold", Arguments: map[string]any{"key": key},
						Meta: sdk.Meta{"carmy/request_id": key}})
					done <- outcome{res, err}
				}()
				awaitKey(t, hold.started, key, "the tool to start")
				return done
			}
			aborted, other := "aborted-"+version, "other-"+version
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			abortedDone := call(ctx, connect(), aborted)
			otherDone := call(t.Context(), connect(), other)
			cancel()
			select {
			case o := <-abortedDone:
				if o.err == nil {
					t.Fatal("the cancelled call answered")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("CallTool did not return after its context was cancelled")
			}
			// Before 2026-07-28 the aborted POST cancels nothing: the
			// notification that follows it does.
			awaitKey(t, hold.ended, aborted, "the tool's context to end")
			awaitStatus(t, base, aborted, "cancelled")
			close(hold.releaseOf(other))
			select {
			case o := <-otherDone:
				if o.err != nil || o.res.IsError {
					t.Errorf("the other client's call: %v %+v", o.err, o.res)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the other client's call did not answer")
			}
			awaitStatus(t, base, other, "completed")
		})
	}
}

// TestMCPCancelSender sends raw calls and notifications/cancelled that
// name the call's JSON-RPC id (1) for the call's principal, each from
// another sender, then from the call's own: only its own cancels it.
// At 2026-07-28 there is no transport session: a notification there
// matches a call made at 2026-07-28 or later with no Mcp-Session-Id.
func TestMCPCancelSender(t *testing.T) {
	hold := newHoldTool()
	_, base := startOASNode(t, api.Config{}, hold.spec())
	type sender struct{ version, mcpSession, carmySession string }
	for _, tc := range []struct {
		name    string
		call    sender
		others  []sender // send a notification that cancels nothing
		matches bool     // whether the call's own sender then cancels it
	}{
		{"2026-07-28", sender{v0728, "", "s"}, []sender{{v0728, "", "other"}, {v0728, "", ""}, {v0728, "m", "s"}, {"2025-11-25", "", "s"}}, true},
		{"2025-06-18 without Mcp-Session-Id", sender{"2025-06-18", "", ""}, []sender{{v0728, "", ""}}, true},
		{"2025-11-25 with Mcp-Session-Id", sender{"2025-11-25", "m1", ""}, []sender{{"2025-11-25", "m2", ""}, {"2025-11-25", "", ""}, {v0728, "", ""}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.ReplaceAll("sender-"+tc.name, " ", "-")
			answered := rawHoldCall(t, base, tc.call.version, tc.call.mcpSession, tc.call.carmySession, key)
			awaitKey(t, hold.started, key, "the tool to start")
			// A notification is served (the cancel made) before its 202.
			for _, o := range tc.others {
				notifyCancelled(t, base, o.version, o.mcpSession, o.carmySession)
				if got := statusOfSession(t, base, tc.call.carmySession, key); got != "running" {
					t.Fatalf("after a notification of %+v, the call's execution is %q, want running", o, got)
				}
			}
			notifyCancelled(t, base, tc.call.version, tc.call.mcpSession, tc.call.carmySession)
			if got := statusOfSession(t, base, tc.call.carmySession, key); got != "cancelled" {
				t.Errorf("after its own sender's notification, the call's execution is %q, want cancelled", got)
			}
			if a := <-answered; !strings.Contains(a, "cancelled") {
				t.Errorf("the call's answer: %s", a)
			}
		})
	}
}

const meta0728 = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`

// mcpRequest is a POST of body to /mcp at version, with Mcp-Session-Id
// mcpSession unless "", and Carmy-Session-Id carmySession.
func mcpRequest(t *testing.T, ctx context.Context, base, version, mcpSession, carmySession, method, name, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", version)
	req.Header.Set("Carmy-Session-Id", carmySession)
	if mcpSession != "" {
		req.Header.Set("Mcp-Session-Id", mcpSession)
	}
	if version == v0728 {
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
	return req
}

// metaAt is the protocol's _meta keys a client sends at version, to
// begin a _meta object with.
func metaAt(version string) string {
	if version == v0728 {
		return meta0728 + ","
	}
	return ""
}

// rawHoldCall starts a tools/call of hold (key) with JSON-RPC id 1 and
// request_id key; its answer comes on the channel.
func rawHoldCall(t *testing.T, base, version, mcpSession, carmySession, key string) <-chan string {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hold","arguments":{"key":%q},"_meta":{%s"carmy/request_id":%q}}}`,
		key, metaAt(version), key)
	req := mcpRequest(t, t.Context(), base, version, mcpSession, carmySession, "tools/call", "hold", body)
	answered := make(chan string, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- err.Error()
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		answered <- string(raw)
	}()
	return answered
}

// notifyCancelled sends a notifications/cancelled of JSON-RPC id 1.
func notifyCancelled(t *testing.T, base, version, mcpSession, carmySession string) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":{%s"carmy/x":1}}}`, metaAt(version))
	resp, err := http.DefaultClient.Do(mcpRequest(t, t.Context(), base, version, mcpSession, carmySession, "notifications/cancelled", "", body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		raw, _ := io.ReadAll(resp.Body)
		t.Fatalf("notifications/cancelled: %d %s", resp.StatusCode, raw)
	}
}

// statusOfSession is the status of the record of requestID in session,
// "" while there is none.
func statusOfSession(t *testing.T, base, session, requestID string) string {
	t.Helper()
	return statusOf(t, base, requestID+"&session_id="+session)
}
