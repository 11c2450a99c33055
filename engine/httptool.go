package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// HTTPTool configures a tool that calls an upstream over HTTP (SPEC §3.1).
type HTTPTool struct {
	URL string
	// Method defaults to POST.
	Method  string
	Headers map[string]string
	// Client defaults to a client with no timeout of its own: the tool's
	// timeout bounds every request through its context.
	Client *http.Client
}

// maxUpstreamBody bounds how much of an upstream answer is read.
const maxUpstreamBody = 8 << 20

// maxErrorBody bounds the upstream text kept in a failed result.
const maxErrorBody = 1 << 10

// Func returns the ToolFunc that sends the call's arguments as the JSON
// body, with the Idempotency-Key, Carmy-Execution-Id, Carmy-Request-Id and
// Carmy-Fencing-Token headers. A 2xx answer is the result: its JSON when
// the answer is JSON (by Content-Type, or valid JSON without one), else
// {"body": text}. Any other status fails with UPSTREAM_STATUS.
func (h HTTPTool) Func() (ToolFunc, error) {
	u, err := url.Parse(h.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("http tool: url %q must be an absolute http or https URL", h.URL)
	}
	method := h.Method
	if method == "" {
		method = http.MethodPost
	}
	client := h.Client
	if client == nil {
		client = &http.Client{}
	}
	headers := h.Headers
	return func(ctx context.Context, c Call) (any, error) {
		req, err := http.NewRequestWithContext(ctx, method, h.URL, bytes.NewReader(c.Arguments))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		if c.RequestID != "" {
			req.Header.Set("Idempotency-Key", c.IdempotencyKey)
			req.Header.Set("Carmy-Request-Id", c.RequestID)
			req.Header.Set("Carmy-Fencing-Token", strconv.FormatUint(c.FencingToken, 10))
		}
		req.Header.Set("Carmy-Execution-Id", c.ExecutionID)
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &ToolError{Code: "UPSTREAM_UNREACHABLE", Message: err.Error()}
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody+1))
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &ToolError{Code: "UPSTREAM_UNREACHABLE", Message: "reading the answer: " + err.Error()}
		}
		if len(body) > maxUpstreamBody {
			return nil, &ToolError{Code: CodeResultTooLarge, Message: fmt.Sprintf("the upstream answered more than %d bytes", maxUpstreamBody)}
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return nil, &ToolError{
				Code:    "UPSTREAM_STATUS",
				Message: fmt.Sprintf("the upstream answered %s", resp.Status),
				Details: map[string]any{"status": resp.StatusCode, "body": truncate(body, maxErrorBody)},
			}
		}
		if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && isJSONType(resp.Header.Get("Content-Type")) && json.Valid(trimmed) {
			return json.RawMessage(trimmed), nil
		}
		return map[string]string{"body": string(body)}, nil
	}, nil
}

// isJSONType reports whether a Content-Type announces JSON: absent,
// application/json, or any application/*+json.
func isJSONType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// truncate returns at most n bytes of b as text, cut at a rune boundary.
func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	b = b[:n]
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	return string(b) + "…"
}
