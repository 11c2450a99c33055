package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// Tool describes a tool the caller may use (docs/api.md#tools-get-v1tools).
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments.
	InputSchema json.RawMessage
	// Timeout is the tool's configured timeout (timeout_ms).
	Timeout time.Duration
}

// Tools lists the tools the caller may use (GET /v1/tools).
func (c *Client) Tools(ctx context.Context) ([]Tool, error) {
	var out struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
			TimeoutMS   int64           `json:"timeout_ms"`
		} `json:"tools"`
	}
	req := &request{method: http.MethodGet, path: "/v1/tools", idempotent: true}
	if _, err := c.do(ctx, req, &out); err != nil {
		return nil, err
	}
	tools := make([]Tool, 0, len(out.Tools))
	for _, t := range out.Tools {
		tools = append(tools, Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
			Timeout: time.Duration(t.TimeoutMS) * time.Millisecond})
	}
	return tools, nil
}

// Ready asks the node whether it serves calls (GET /readyz), once, without
// retries: nil when it does, else an error (ErrUnavailable while it has no
// leader or has not caught up). Poll it to wait for a node to start.
func (c *Client) Ready(ctx context.Context) error {
	req := &request{method: http.MethodGet, path: "/readyz", idempotent: true, retry: NoRetry.withDefaults()}
	_, err := c.do(ctx, req, nil)
	return err
}

// Live asks the node whether its process serves (GET /healthz), once,
// without retries: nil when it does, else an error. Unlike Ready it says
// nothing about whether the node takes calls.
func (c *Client) Live(ctx context.Context) error {
	req := &request{method: http.MethodGet, path: "/healthz", idempotent: true, retry: NoRetry.withDefaults()}
	_, err := c.do(ctx, req, nil)
	return err
}
