package mcpgateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/mcpgateway"
	"github.com/carmyhq/carmy/tests/testutil"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// The secrets of the upstreams' configuration.
const (
	querySecret  = "query-SECRET-5d1e"
	headerSecret = "header-SECRET-a77b"
)

var alice = engine.Caller{Principal: "alice"}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newRuntime returns a runtime shut down at cleanup.
func newRuntime(t *testing.T) *engine.Runtime {
	t.Helper()
	rt := engine.New(engine.WithLogger(quietLogger()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rt.Shutdown(ctx)
	})
	return rt
}

// startUpstream starts an Upstream of rt, closed at cleanup.
func startUpstream(t *testing.T, rt *engine.Runtime, cfg mcpgateway.Config) *mcpgateway.Upstream {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 500 * time.Millisecond
	}
	u, err := mcpgateway.New(rt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

// waitTool waits until rt lists the tool name.
func waitTool(t *testing.T, rt *engine.Runtime, name string) engine.ToolInfo {
	t.Helper()
	var listed engine.ToolInfo
	wait.For(t, 30*time.Second, "tool "+name+" to be listed", func() error {
		for _, ti := range rt.Tools() {
			if ti.Name == name {
				// Listed; the group is available once the tools are set.
				listed = ti
				return nil
			}
		}
		return fmt.Errorf("tools: %v", rt.Tools())
	})
	return listed
}

func mustCall(t *testing.T, rt *engine.Runtime, req engine.Request) engine.Response {
	t.Helper()
	resp, err := rt.Call(t.Context(), alice, req)
	if err != nil {
		t.Fatalf("Call(%s, %q): %v", req.Tool, req.RequestID, err)
	}
	return resp
}

// errorOf decodes a record's error.
func errorOf(t *testing.T, raw json.RawMessage) (code, msg string) {
	t.Helper()
	var e struct{ Code, Message string }
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("error %s: %v", raw, err)
	}
	return e.Code, e.Message
}

// fakeUpstream is a go-sdk MCP server over Streamable HTTP on 127.0.0.1
// that counts its executions by tool and request_id, and remembers what
// its last call carried.
type fakeUpstream struct {
	*httptest.Server
	mcp *mcp.Server

	mu       sync.Mutex
	runs     map[string]int // "tool request_id" → executions
	lastMeta mcp.Meta
	lastHdr  http.Header
	auths    []string // every Authorization header the server saw

	total  atomic.Int64
	refuse atomic.Bool // answer every HTTP request 503
	// drop, when set, is a tool whose tools/call requests are read whole
	// and then hung up on, unanswered.
	drop atomic.Value
	// find is what the reconcile tool find answers: 1 found, 2 not
	// found, else an error result; finds counts its calls, lastFind holds
	// the arguments of the last.
	find     atomic.Int32
	finds    atomic.Int32
	lastFind atomic.Value
	started  chan string // request ids, as block starts
	release  chan struct{}
	// handler serves MCP; restart replaces it, by one that keeps the
	// events of its streams for a client to resume them when resumable
	// is set. refuseNew, when set, answers 503 to every request that
	// names no session (an initialize).
	handler   atomic.Pointer[mcp.StreamableHTTPHandler]
	resumable atomic.Bool
	refuseNew atomic.Bool
}

func newFakeUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	f := &fakeUpstream{runs: make(map[string]int), started: make(chan string, 100), release: make(chan struct{})}
	f.mcp = mcp.NewServer(&mcp.Implementation{Name: "fake", Version: "v1"}, nil)
	object := json.RawMessage(`{"type":"object"}`)
	f.mcp.AddTool(&mcp.Tool{Name: "create", Description: "Create an order",
		InputSchema: json.RawMessage(`{"type":"object","required":["sku"],"properties":{"sku":{"type":"string"}}}`),
		Annotations: &mcp.ToolAnnotations{Title: "Create", OpenWorldHint: new(bool)}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Sku string }
			json.Unmarshal(req.Params.Arguments, &args)
			n := f.count("create", req)
			return &mcp.CallToolResult{StructuredContent: map[string]any{"order": n, "sku": args.Sku},
				Content: []mcp.Content{&mcp.TextContent{Text: "ordered"}}}, nil
		})
	f.mcp.AddTool(&mcp.Tool{Name: "text", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			f.count("text", req)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil
		})
	f.mcp.AddTool(&mcp.Tool{Name: "fail", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			f.count("fail", req)
			// An upstream that echoes what it was sent, secrets included.
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{
				&mcp.TextContent{Text: "ticket not found"}, &mcp.TextContent{Text: "auth was " + req.Extra.Header.Get("Authorization")}}}, nil
		})
	f.mcp.AddTool(&mcp.Tool{Name: "block", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			f.count("block", req)
			id, _ := req.Params.Meta[mcpgateway.MetaRequestID].(string)
			f.started <- id
			select {
			case <-f.release:
				return &mcp.CallToolResult{StructuredContent: map[string]any{"released": true}}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	f.mcp.AddTool(&mcp.Tool{Name: "seen", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			f.count("seen", req)
			return &mcp.CallToolResult{StructuredContent: map[string]any{"ok": true}}, nil
		})
	f.mcp.AddTool(&mcp.Tool{Name: "find", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			f.finds.Add(1)
			f.lastFind.Store(string(req.Params.Arguments))
			switch f.find.Load() {
			case 1:
				return &mcp.CallToolResult{StructuredContent: map[string]any{"found": true, "data": map[string]any{"order": 99}}}, nil
			case 2:
				return &mcp.CallToolResult{StructuredContent: map[string]any{"found": false}}, nil
			}
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "lookup down"}}}, nil
		})
	f.restart()
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.auths = append(f.auths, r.Header.Get("Authorization"))
		f.mu.Unlock()
		if f.refuse.Load() || f.refuseNew.Load() && r.Header.Get("Mcp-Session-Id") == "" {
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		if tool, _ := f.drop.Load().(string); tool != "" && r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"name":"`+tool+`"`)) {
				if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
					c.Close()
				}
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		f.handler.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		f.Server.CloseClientConnections()
		f.Server.Close()
	})
	return f
}

// restart puts a new MCP handler, with sessions of its own, behind f's
// address, as a restarted server process: it answers 404 to a request
// on a session of the old one (which goes on serving the streams it has
// open, unknown to the new one).
func (f *fakeUpstream) restart() {
	opts := &mcp.StreamableHTTPOptions{Logger: quietLogger()}
	if f.resumable.Load() {
		opts.EventStore = mcp.NewMemoryEventStore(nil)
	}
	f.handler.Store(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.mcp }, opts))
}

func (f *fakeUpstream) count(tool string, req *mcp.CallToolRequest) int {
	f.total.Add(1)
	id, _ := req.Params.Meta[mcpgateway.MetaRequestID].(string)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[tool+" "+id]++
	f.lastMeta = req.Params.Meta
	f.lastHdr = req.Extra.Header.Clone()
	return f.runs[tool+" "+id]
}

func (f *fakeUpstream) runsOf(tool, requestID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[tool+" "+requestID]
}

func (f *fakeUpstream) last() (mcp.Meta, http.Header) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastMeta, f.lastHdr
}

func (f *fakeUpstream) seenAuths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.auths)
}

// binDir holds the binaries the tests build; TestMain removes it.
var binDir string

// TestMain lets the tests marked t.Parallel (each its own runtime and
// upstreams) run four at a time: they wait on upstreams and timers.
func TestMain(m *testing.M) {
	testutil.RaiseParallel(4)
	dir, err := os.MkdirTemp("", "carmy-mcpgateway-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildStdioServer builds testdata/stdioserver once per test binary.
var buildStdioServer = sync.OnceValues(func() (string, error) {
	dir := binDir
	bin := filepath.Join(dir, "stdioserver")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/stdioserver").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func stdioServer(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to build the stdio server with")
	}
	bin, err := buildStdioServer()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// lines returns the lines of a file ("" when it does not exist).
func lines(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(string(raw), " ", "|"))
}

// logBuffer is a log destination safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newRedirector serves, on 127.0.0.1 until the test ends, a 307 redirect
// of every request to target.
func newRedirector(t *testing.T, target string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(s.Close)
	return s.URL
}
