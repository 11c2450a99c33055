package mcpgateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// hostile wraps an MCP handler: tools/call of "huge" is answered with a
// JSON body of hugeBytes, of "huge_error" with a 500 of as many bytes,
// and of "endless" with one SSE event that goes on (at about 64 MB/s, up
// to 1 GiB) until the client stops reading.
type hostile struct {
	next      http.Handler
	hugeBytes int
	sent      atomic.Int64 // bytes of the last hostile answer
}

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		h.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m struct {
		ID     json.RawMessage
		Method string
		Params struct{ Name string }
	}
	json.Unmarshal(body, &m)
	if m.Method != "tools/call" || (m.Params.Name != "huge" && m.Params.Name != "huge_error" && m.Params.Name != "endless") {
		h.next.ServeHTTP(w, r)
		return
	}
	h.sent.Store(0)
	prefix := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"`
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	rc := http.NewResponseController(w)
	write := func(p []byte) bool {
		n, err := w.Write(p)
		h.sent.Add(int64(n))
		return err == nil
	}
	if m.Params.Name == "huge" || m.Params.Name == "huge_error" {
		w.Header().Set("Content-Type", "application/json")
		if m.Params.Name == "huge_error" {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusInternalServerError)
		}
		write([]byte(prefix))
		for left := h.hugeBytes; left > 0; left -= len(chunk) {
			if !write(chunk[:min(left, len(chunk))]) {
				return
			}
		}
		write([]byte(`"}]}}`))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	write([]byte("event: message\ndata: " + prefix))
	for h.sent.Load() < 1<<30 {
		if !write(chunk) || rc.Flush() != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// TestHTTPOversizeAnswers: an HTTP upstream's JSON body, an error body,
// or one SSE event, past the bound is the call's RESULT_TOO_LARGE, read no further
// than the bound; an answer within it is served, and so are later calls.
func TestHTTPOversizeAnswers(t *testing.T) {
	f := newFakeUpstream(t)
	object := json.RawMessage(`{"type":"object"}`)
	never := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, fmt.Errorf("answered by the hostile handler")
	}
	f.mcp.AddTool(&mcp.Tool{Name: "huge", InputSchema: object}, never)
	f.mcp.AddTool(&mcp.Tool{Name: "endless", InputSchema: object}, never)
	f.mcp.AddTool(&mcp.Tool{Name: "huge_error", InputSchema: object}, never)
	h := &hostile{next: f.Config.Handler, hugeBytes: 512 << 10}
	f.Config.Handler = h
	rt := newRuntime(t) // its result limit: 1 MiB
	cfg := httpConfig(f)
	cfg.MaxAnswerBytes = 64 << 10
	cfg.Timeout = 20 * time.Second
	startUpstream(t, rt, cfg)
	waitTool(t, rt, "tickets.endless")

	for _, tool := range []string{"tickets.huge", "tickets.huge_error", "tickets.endless"} {
		rec := callEventually(t, rt, engine.Request{Tool: tool, RequestID: "r-" + tool}).Record
		if code, msg := errorOf(t, rec.Error); rec.Status != store.StatusFailed || code != engine.CodeResultTooLarge {
			t.Fatalf("%s: %s %s %s", tool, rec.Status, code, msg)
		}
		if tool == "tickets.endless" {
			// What the node did not read waits in socket buffers, then
			// the upstream's writes fail.
			testutil.WaitFor(t, 30*time.Second, "the endless event's writer stopped", func() error {
				before := h.sent.Load()
				time.Sleep(100 * time.Millisecond)
				if after := h.sent.Load(); after != before {
					return fmt.Errorf("%d bytes sent, still growing", after)
				}
				return nil
			})
			if sent := h.sent.Load(); sent > 32<<20 {
				t.Errorf("the upstream got %d bytes of one event out before the node stopped reading", sent)
			}
		}
		ok := callEventually(t, rt, engine.Request{Tool: "tickets.create", RequestID: "after-" + tool, Arguments: json.RawMessage(`{"sku":"A"}`)})
		if ok.Record.Status != store.StatusCompleted {
			t.Fatalf("a call after %s: %s %s", tool, ok.Record.Status, ok.Record.Error)
		}
	}
}

// TestHTTPUpstreamRedactsResults: an upstream that echoes its configured
// Authorization header (and the URL's token) in its result: the record
// holds [redacted] instead, in data as in content.
func TestHTTPUpstreamRedactsResults(t *testing.T) {
	f := newFakeUpstream(t)
	f.mcp.AddTool(&mcp.Tool{Name: "whoami", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			auth := req.Extra.Header.Get("Authorization")
			return &mcp.CallToolResult{StructuredContent: map[string]any{"auth": auth, "token": auth[len("Bearer "):], auth: "as a key", "n": 42}}, nil
		})
	f.mcp.AddTool(&mcp.Tool{Name: "whoami_text", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you are " + req.Extra.Header.Get("Authorization") + " from token=" + querySecret}}}, nil
		})
	rt := newRuntime(t)
	startUpstream(t, rt, httpConfig(f))
	waitTool(t, rt, "tickets.whoami_text")
	rec := mustCall(t, rt, engine.Request{Tool: "tickets.whoami", RequestID: "w"}).Record
	if want := `{"[redacted]":"as a key","auth":"[redacted]","n":42,"token":"[redacted]"}`; string(rec.Data) != want {
		t.Errorf("structuredContent: %s, want %s", rec.Data, want)
	}
	text := mustCall(t, rt, engine.Request{Tool: "tickets.whoami_text", RequestID: "wt"}).Record
	// Redacted, only the string that held a secret is written anew: the
	// members keep the upstream's order.
	if want := `{"content":[{"type":"text","text":"you are [redacted] from [redacted]"}]}`; string(text.Data) != want {
		t.Errorf("content: %s, want %s", text.Data, want)
	}
	// Nothing to redact: the answer as the upstream ordered it.
	plain := mustCall(t, rt, engine.Request{Tool: "tickets.text", RequestID: "p"}).Record
	if want := `{"content":[{"type":"text","text":"hello"}]}`; string(plain.Data) != want {
		t.Errorf("content: %s, want %s", plain.Data, want)
	}
}

// TestUpstreamSchemaReferencingAFile: a tool whose schema references a
// local file is left out, with a log line naming the server and the tool;
// the file's content is nowhere; the server's other tools are served.
func TestUpstreamSchemaReferencingAFile(t *testing.T) {
	const secret = "schema-file-SECRET-e01f"
	path := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(path, []byte(`{"type":"string","enum":["`+secret+`"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFakeUpstream(t)
	f.mcp.AddTool(&mcp.Tool{Name: "leak",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"file://` + path + `"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]any{"ran": true}}, nil
		})
	rt := newRuntime(t)
	logs := &logBuffer{}
	cfg := httpConfig(f)
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	startUpstream(t, rt, cfg)
	waitTool(t, rt, "tickets.create")
	for _, ti := range rt.Tools() {
		if ti.Name == "tickets.leak" {
			t.Fatalf("a tool whose schema references a file is listed: %s", ti.InputSchema)
		}
	}
	_, err := rt.Call(t.Context(), alice, engine.Request{Tool: "tickets.leak", Arguments: json.RawMessage(`{"x":"a"}`)})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("a call of the left-out tool: %v", err)
	}
	line := ""
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "a tool is left out") {
			line = l
		}
	}
	if !strings.Contains(line, "mcp_server=tickets") || !strings.Contains(line, "tool=leak") {
		t.Errorf("the log line does not name the server and the tool: %q", line)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log holds the file's content:\n%s", logs)
	}
}
