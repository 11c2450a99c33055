// Command stdioserver is an MCP server over stdio for the tests of package
// mcpgateway and of the carmy binary: it appends one line per execution
// (the tool and the _meta carmy/request_id) to the file of -count, and its
// process id to the file of -pid.
//
// Tools: create {sku} (structuredContent {"n", "sku"}), block (counts,
// then waits until the connection ends), echo_meta (structuredContent:
// the _meta it got), env (structuredContent: its environment, working
// directory and open file descriptors), huge {bytes} (a text of that
// many bytes), wait (counts, waits until the call is cancelled, then
// appends "cancelled <request_id>"), hang (counts, then never answers,
// whatever happens) and freeze (counts, then neither reads nor writes
// anything any more: the whole server hangs).
//
// Resources: mem://hello ("hello") and the template mem://bytes/{n} (a
// text of n bytes); prompt: greet {who}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	countPath := flag.String("count", "", "file to append one line per execution to")
	pidPath := flag.String("pid", "", "file to write the process id to")
	flag.Parse()
	if *pidPath != "" {
		if err := os.WriteFile(*pidPath, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			log.Fatal(err)
		}
	}
	var mu sync.Mutex
	n := 0
	count := func(tool string, meta mcp.Meta) int {
		mu.Lock()
		defer mu.Unlock()
		n++
		if *countPath != "" {
			f, err := os.OpenFile(*countPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Fprintf(f, "%s %v\n", tool, meta["carmy/request_id"])
			if err := f.Close(); err != nil {
				log.Fatal(err)
			}
		}
		return n
	}
	object := json.RawMessage(`{"type":"object"}`)
	s := mcp.NewServer(&mcp.Implementation{Name: "stdioserver", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "create", Description: "Create a thing",
		InputSchema: json.RawMessage(`{"type":"object","required":["sku"],"properties":{"sku":{"type":"string"}}}`),
		Annotations: &mcp.ToolAnnotations{IdempotentHint: false, Title: "Create"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Sku string }
			json.Unmarshal(req.Params.Arguments, &args)
			k := count("create", req.Params.Meta)
			return &mcp.CallToolResult{StructuredContent: map[string]any{"n": k, "sku": args.Sku},
				Content: []mcp.Content{&mcp.TextContent{Text: "created"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "block", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			count("block", req.Params.Meta)
			<-ctx.Done()
			return nil, ctx.Err()
		})
	s.AddTool(&mcp.Tool{Name: "exit", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			count("exit", req.Params.Meta)
			os.Exit(3) // dies mid-call: the request was read, no answer comes
			return nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "echo_meta", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]any{"meta": req.Params.Meta}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "env", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			cwd, _ := os.Getwd()
			return &mcp.CallToolResult{StructuredContent: map[string]any{"env": os.Environ(), "cwd": cwd, "fds": openFiles()}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "huge", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct{ Bytes int }
			json.Unmarshal(req.Params.Arguments, &args)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", args.Bytes)}}}, nil
		})
	// Resources and a prompt, for the gateway to pass through.
	s.AddResource(&mcp.Resource{Name: "hello", URI: "mem://hello", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "hello"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "bytes", URITemplate: "mem://bytes/{n}"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			n, _ := strconv.Atoi(strings.TrimPrefix(req.Params.URI, "mem://bytes/"))
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: strings.Repeat("x", n)}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Hello " + req.Params.Arguments["who"]}},
				{Role: "user", Content: &mcp.ResourceLink{URI: "mem://hello", Name: "hello"}},
			}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "wait", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			count("wait", req.Params.Meta)
			<-ctx.Done()
			count("cancelled", req.Params.Meta)
			return nil, ctx.Err()
		})
	s.AddTool(&mcp.Tool{Name: "hang", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			count("hang", req.Params.Meta)
			select {}
		})
	frozen := make(chan struct{})
	var freeze sync.Once
	s.AddTool(&mcp.Tool{Name: "freeze", InputSchema: object},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			count("freeze", req.Params.Meta)
			freeze.Do(func() { close(frozen) })
			select {}
		})
	stdio := &mcp.IOTransport{Reader: gate{os.Stdin, frozen}, Writer: gate{os.Stdout, frozen}}
	if err := s.Run(context.Background(), stdio); err != nil {
		log.Print(err)
	}
}

// gate passes reads and writes on until frozen is closed; from then on
// they block for ever (what was read meanwhile is dropped).
type gate struct {
	f      *os.File
	frozen chan struct{}
}

func (g gate) Read(p []byte) (int, error) {
	g.wait()
	n, err := g.f.Read(p)
	g.wait()
	return n, err
}

func (g gate) Write(p []byte) (int, error) {
	g.wait()
	return g.f.Write(p)
}

func (g gate) Close() error { return g.f.Close() }

func (g gate) wait() {
	select {
	case <-g.frozen:
		select {}
	default:
	}
}

// openFiles returns "<fd> <target>" for each open file descriptor of the
// process (Linux: /proc/self/fd), the directory read for it included.
func openFiles() []string {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return []string{"error " + err.Error()}
	}
	var out []string
	for _, e := range entries {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		out = append(out, e.Name()+" "+target)
	}
	return out
}
