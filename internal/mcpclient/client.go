package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
)

// Client posts JSON-RPC requests to one MCP endpoint at one protocol
// version. Its zero value is not usable: set URL and Version. A Client is
// safe for concurrent use.
type Client struct {
	// HTTP sends the requests; nil is http.DefaultClient.
	HTTP *http.Client
	// URL is the endpoint's ("http://127.0.0.1:8080/mcp").
	URL string
	// Version is the protocol version of every request.
	Version string
	// Name is the client's name in clientInfo (stateless versions);
	// "" is "carmy-mcpclient".
	Name string
	// Token, when not empty, is sent as a bearer token.
	Token string
	// Header holds headers added to every request (Carmy-Session-Id…).
	Header http.Header

	ids atomic.Int64
}

// Answer is the answer to one request.
type Answer struct {
	// Status is the HTTP status.
	Status int
	// Header is the answer's headers.
	Header http.Header
	// Body is the JSON-RPC message: the body of a JSON answer, the data
	// of the last message of an event stream, else the body as it came.
	Body []byte
}

// Decode decodes the answer's message into v.
func (a Answer) Decode(v any) error {
	if err := json.Unmarshal(a.Body, v); err != nil {
		return fmt.Errorf("mcpclient: HTTP %d, not a JSON-RPC message: %q: %w", a.Status, a.Body, err)
	}
	return nil
}

// CallTool sends a tools/call of tool with arguments (nil: none) and the
// _meta members meta (Carmy's: carmy/request_id…), to which it adds the
// protocol's own at a stateless version.
func (c *Client) CallTool(ctx context.Context, tool string, arguments any, meta map[string]any) (Answer, error) {
	params := map[string]any{"name": tool}
	if arguments != nil {
		params["arguments"] = arguments
	}
	if len(meta) > 0 {
		params["_meta"] = meta
	}
	return c.Send(ctx, MethodCallTool, params)
}

// Send sends one request of method with params (nil: none), with a fresh
// id. At a stateless version params' _meta gains the protocol's own
// members (params and its _meta are not changed: they are copied), and
// the Mcp-Name header names params' "name" when it is a string.
func (c *Client) Send(ctx context.Context, method string, params map[string]any) (Answer, error) {
	name, _ := params["name"].(string)
	if pm := ProtocolMeta(c.Version, c.name()); pm != nil {
		params = maps.Clone(params)
		if params == nil {
			params = map[string]any{}
		}
		meta, _ := params["_meta"].(map[string]any)
		meta = maps.Clone(meta)
		if meta == nil {
			meta = map[string]any{}
		}
		maps.Copy(meta, pm)
		params["_meta"] = meta
	}
	msg := map[string]any{"jsonrpc": "2.0", "id": c.ids.Add(1), "method": method}
	if params != nil {
		msg["params"] = params
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return Answer{}, fmt.Errorf("mcpclient: encoding %s: %w", method, err)
	}
	return c.Post(ctx, method, name, body)
}

// Post posts body, one JSON-RPC message of method (naming name, or ""),
// as it is, with the headers of the client's version, and reads the
// answer.
func (c *Client) Post(ctx context.Context, method, name string, body []byte) (Answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return Answer{}, fmt.Errorf("mcpclient: %w", err)
	}
	req.Header = Headers(c.Version, method, name)
	for k, v := range c.Header {
		req.Header[k] = v
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("mcpclient: %s: %w", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{Status: resp.StatusCode, Header: resp.Header}, fmt.Errorf("mcpclient: reading the answer to %s: %w", method, err)
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: message(resp.Header.Get("Content-Type"), raw)}, nil
}

func (c *Client) name() string {
	if c.Name == "" {
		return "carmy-mcpclient"
	}
	return c.Name
}

// message is the JSON-RPC message of an answer of Content-Type ct: the
// data of an event stream's last message, else raw.
func message(ct string, raw []byte) []byte {
	if mt, _, _ := mime.ParseMediaType(ct); mt != "text/event-stream" {
		return raw
	}
	var last, data []byte
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, len(raw)+1)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != nil {
				last, data = data, nil
			}
		case strings.HasPrefix(line, "data:"):
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
			if data == nil {
				data = []byte{}
			}
		}
	}
	if data != nil {
		last = data
	}
	if last == nil {
		return raw
	}
	return last
}
