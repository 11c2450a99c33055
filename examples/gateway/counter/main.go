// Command counter is a small MCP server over stdio, for Carmy to sit in
// front of (examples/gateway): its tool has an effect that must not happen
// twice, a counter kept in a file.
//
// Tools:
//
//	add {by, delay_ms}  adds by (default 1) to the counter, then waits
//	                    delay_ms (default 0) before it answers {"count", "by"};
//	                    the addition is on disk before the wait
//	get {}              answers {"count"}
//	find_add {idempotency_key}
//	                    the reconcile tool: {"found": true, "data": {"count",
//	                    "by"}} when an add ran under that key, else
//	                    {"found": false}
//
// Files, in the working directory (Carmy gives each server one of its
// own): count (the counter, a decimal number), adds (one line per add:
// the idempotency key Carmy sent in _meta, by, and the count after it) and
// pid (this process's id, to kill it with). An add writes its line to adds
// before it writes count, both synced, so that find_add never misses an
// addition that count holds.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := os.WriteFile("pid", []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		log.Fatal(err)
	}
	c := &counter{}
	s := mcp.NewServer(&mcp.Implementation{Name: "counter", Version: "v1"}, nil)
	s.AddTool(&mcp.Tool{Name: "add", Description: "Add to the counter (an effect: it must not happen twice)",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"by":{"type":"integer","minimum":1},"delay_ms":{"type":"integer","minimum":0,"maximum":60000}},"additionalProperties":false}`)},
		c.add)
	s.AddTool(&mcp.Tool{Name: "get", Description: "Read the counter",
		InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		c.get)
	s.AddTool(&mcp.Tool{Name: "find_add", Description: "Whether an add ran under an idempotency key (Carmy's reconcile tool)",
		InputSchema: json.RawMessage(`{"type":"object","required":["idempotency_key"],"properties":{"idempotency_key":{"type":"string"}}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		c.find)
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Print(err)
	}
}

// counter serialises the additions of one process.
type counter struct{ mu sync.Mutex }

type addition struct {
	Key   string `json:"key"`
	By    int    `json:"by"`
	Count int    `json:"count"`
}

func (c *counter) add(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := struct {
		By      int `json:"by"`
		DelayMS int `json:"delay_ms"`
	}{By: 1}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	key, _ := req.Params.Meta["carmy/idempotency_key"].(string)
	c.mu.Lock()
	n, err := readCount()
	if err == nil {
		n += args.By
		err = appendAddition(addition{Key: key, By: args.By, Count: n})
	}
	if err == nil {
		err = writeSynced("count", []byte(strconv.Itoa(n)+"\n"))
	}
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select { // the effect is on disk; the answer is not sent yet
	case <-time.After(time.Duration(args.DelayMS) * time.Millisecond):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &mcp.CallToolResult{StructuredContent: map[string]any{"count": n, "by": args.By},
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("the counter is %d", n)}}}, nil
}

func (c *counter) get(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c.mu.Lock()
	n, err := readCount()
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{StructuredContent: map[string]any{"count": n},
		Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(n)}}}, nil
}

func (c *counter) find(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Key string `json:"idempotency_key"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.Key == "" {
		return nil, errors.New("want {\"idempotency_key\": \"…\"}")
	}
	c.mu.Lock()
	found, err := findAddition(args.Key)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := map[string]any{"found": found != nil}
	if found != nil {
		out["data"] = map[string]any{"count": found.Count, "by": found.By}
	}
	return &mcp.CallToolResult{StructuredContent: out, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(out)}}}, nil
}

// readCount reads the counter; no file is 0.
func readCount() (int, error) {
	b, err := os.ReadFile("count")
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("the file count holds %q, not a number", b)
	}
	return n, nil
}

// writeSynced replaces the file name with b, synced, so that a crash
// leaves the old content or the new.
func writeSynced(name string, b []byte) error {
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

func appendAddition(a addition) error {
	line, err := json.Marshal(a)
	if err != nil {
		return err
	}
	f, err := os.OpenFile("adds", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// findAddition returns the last addition made under key, or nil.
func findAddition(key string) (*addition, error) {
	f, err := os.Open("adds")
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var found *addition
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var a addition
		if json.Unmarshal(sc.Bytes(), &a) == nil && a.Key == key {
			found = &a
		}
	}
	return found, sc.Err()
}
