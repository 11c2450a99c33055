// Command agent calls a Carmy node over MCP the way an agent framework
// does, and retries the same step as an agent does after a timeout: with a
// new connection and a new JSON-RPC id, but the same carmy/request_id in
// _meta. Carmy runs the tool once; the retry is a replay.
//
//	go run ./cmd/carmy serve --dev          # in another terminal
//	go run ./examples/agent                 # or: -url http://host:8080/mcp -token …
//
// Without -url it calls 127.0.0.1 on the port docs/cluster.md calls 8080,
// moved by CARMY_PORT_BASE as scripts/ports moves it (the README's dev
// node started on $(port 8080)).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	port, err := devPort(os.Getenv("CARMY_PORT_BASE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(2)
	}
	url := flag.String("url", fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "the node's MCP endpoint (default port 8080, moved by $CARMY_PORT_BASE)")
	token := flag.String("token", os.Getenv("CARMY_TOKEN"), "bearer token, when the node has auth on (default $CARMY_TOKEN)")
	step := flag.String("request-id", fmt.Sprintf("agent-step-%d", time.Now().UnixNano()), "the step's request id, stable across its retries")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for attempt := 1; attempt <= 2; attempt++ {
		if err := call(ctx, *url, *token, *step, attempt); err != nil {
			fmt.Fprintln(os.Stderr, "agent:", err)
			os.Exit(1)
		}
	}
}

// call connects afresh (as a retry after a lost connection would) and
// calls create_order under the step's request id.
func call(ctx context.Context, url, token, step string, attempt int) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "example-agent", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: url}
	if token != "" {
		transport.HTTPClient = &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
	}
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", url, err)
	}
	defer session.Close()
	res, err := session.CallTool(ctx, &mcp.CallToolParams{
		Name:      "create_order",
		Arguments: map[string]any{"sku": "KB-01"},
		Meta:      mcp.Meta{"carmy/request_id": step},
	})
	if err != nil {
		return fmt.Errorf("tools/call: %w", err)
	}
	fmt.Printf("attempt %d: isError=%v replayed=%v execution=%v data=%v\n",
		attempt, res.IsError, res.Meta["carmy/replayed"], res.Meta["carmy/execution_id"], res.StructuredContent)
	return nil
}

// bearer adds the token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// devPort is the port of the dev node: 8080 for CARMY_PORT_BASE 7000 (the
// default, base ""), moved with it as scripts/ports does (base + 1080).
func devPort(base string) (int, error) {
	if base == "" {
		return 8080, nil
	}
	b, err := strconv.Atoi(base)
	if err != nil || b < 1024 || b > 64000 {
		return 0, fmt.Errorf("CARMY_PORT_BASE=%s: want a number between 1024 and 64000 (default 7000)", base)
	}
	return b + 8080 - 7000, nil
}
