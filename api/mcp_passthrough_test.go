package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/mcp"
	"github.com/carmyhq/carmy/mcpgateway"
	"github.com/carmyhq/carmy/tests/testutil"
)

// passthroughUpstream is an upstream MCP server with a tool, a resource,
// a resource template and a prompt, served over Streamable HTTP.
func passthroughUpstream(t *testing.T) (*sdk.Server, string) {
	t.Helper()
	up := sdk.NewServer(&sdk.Implementation{Name: "up", Version: "v1"}, nil)
	up.AddTool(&sdk.Tool{Name: "a", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}}}, nil
		})
	read := func(_ context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{
			{URI: req.Params.URI, MIMEType: "text/plain", Text: "text of " + req.Params.URI},
		}}, nil
	}
	up.AddResource(&sdk.Resource{Name: "a", URI: "file:///notes/a.txt", MIMEType: "text/plain"}, read)
	up.AddResourceTemplate(&sdk.ResourceTemplate{Name: "note", URITemplate: "file:///notes/{name}"}, read)
	up.AddPrompt(&sdk.Prompt{Name: "greet", Arguments: []*sdk.PromptArgument{{Name: "who", Required: true}}},
		func(_ context.Context, req *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{
				{Role: "user", Content: &sdk.TextContent{Text: "Hello " + req.Params.Arguments["who"]}},
			}}, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return up }, nil))
	t.Cleanup(srv.Close)
	return up, srv.URL
}

// bearer adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// listener is a go-sdk client of /mcp that counts the list_changed
// notifications it gets.
type listener struct {
	cs                        *sdk.ClientSession
	tools, resources, prompts atomic.Int64
}

func connectListener(t *testing.T, base, token, version string) *listener {
	t.Helper()
	l := &listener{}
	client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "v1"}, &sdk.ClientOptions{
		ToolListChangedHandler:     func(context.Context, *sdk.ToolListChangedRequest) { l.tools.Add(1) },
		ResourceListChangedHandler: func(context.Context, *sdk.ResourceListChangedRequest) { l.resources.Add(1) },
		PromptListChangedHandler:   func(context.Context, *sdk.PromptListChangedRequest) { l.prompts.Add(1) },
	})
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token}}}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	l.cs = cs
	return l
}

// TestMCPGatewayPassesResourcesAndPrompts: an upstream's resources,
// resource template and prompts reach a client of /mcp (the go-sdk's, at
// 2025-11-25 and at 2026-07-28) under the upstream's prefix, read and got
// through Carmy; a principal that may call none of the upstream's tools
// sees none of them; and when the upstream gains a tool, a resource and
// a prompt, the clients that listen are told (on the GET stream, on a
// subscriptions/listen stream) and see them, and the other principal is
// told nothing.
func TestMCPGatewayPassesResourcesAndPrompts(t *testing.T) {
	up, upURL := passthroughUpstream(t)
	app := carmy.App(carmy.WithLogger(quietLogger()), carmy.WithDrainTimeout(time.Second))
	if err := app.AddDemoTools(); err != nil {
		t.Fatal(err)
	}
	u, err := mcpgateway.New(app, mcpgateway.Config{Name: "up", URL: upURL, Logger: quietLogger(), MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	dir := mcpgateway.NewDirectory([]*mcpgateway.Upstream{u})
	if err := u.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	const allToken, echoToken = "token-of-all-0123456789", "token-of-echo-0123456789"
	base := "http://" + testutil.Serve(t, app, api.Config{Logger: quietLogger(), MCP: mcp.EndpointWith(dir), Auth: api.Auth{Tokens: []api.Token{
		{Principal: "all", Secret: allToken, Tools: []string{"*"}},
		{Principal: "echoer", Secret: echoToken, Tools: []string{"echo"}},
	}}})
	testutil.WaitFor(t, 30*time.Second, "the upstream to be listed", func() error {
		if res, _ := dir.Offers(); !res || !hasTool(app.Tools(), "up.a") {
			return errNotYet
		}
		return nil
	})

	versions := []string{"2025-11-25", "2026-07-28"}
	all := map[string]*listener{}
	for _, v := range versions {
		l := connectListener(t, base, allToken, v)
		all[v] = l
		ctx := t.Context()
		caps := l.cs.InitializeResult().Capabilities
		if caps.Resources == nil || caps.Prompts == nil || caps.Tools == nil || !caps.Tools.ListChanged {
			t.Errorf("%s: capabilities %+v: want resources, prompts and tools.listChanged", v, caps)
		}
		rs, err := l.cs.ListResources(ctx, nil)
		if err != nil || len(rs.Resources) != 1 || rs.Resources[0].URI != "carmy:up/file:///notes/a.txt" {
			t.Errorf("%s: resources/list: %+v %v", v, rs, err)
		}
		ts, err := l.cs.ListResourceTemplates(ctx, nil)
		if err != nil || len(ts.ResourceTemplates) != 1 || ts.ResourceTemplates[0].URITemplate != "carmy:up/file:///notes/{name}" {
			t.Errorf("%s: resources/templates/list: %+v %v", v, ts, err)
		}
		for _, uri := range []string{"carmy:up/file:///notes/a.txt", "carmy:up/file:///notes/b.md"} {
			rr, err := l.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].URI != uri || rr.Contents[0].Text != "text of "+strings.TrimPrefix(uri, "carmy:up/") {
				t.Errorf("%s: resources/read %s: %+v %v", v, uri, rr, err)
			}
		}
		ps, err := l.cs.ListPrompts(ctx, nil)
		if err != nil || len(ps.Prompts) != 1 || ps.Prompts[0].Name != "up.greet" {
			t.Errorf("%s: prompts/list: %+v %v", v, ps, err)
		}
		pr, err := l.cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "up.greet", Arguments: map[string]string{"who": "Ann"}})
		if err != nil || len(pr.Messages) != 1 || pr.Messages[0].Content.(*sdk.TextContent).Text != "Hello Ann" {
			t.Errorf("%s: prompts/get: %+v %v", v, pr, err)
		}
		// Names without the prefix, or of no upstream, are nobody's.
		for _, uri := range []string{"file:///notes/a.txt", "carmy:nope/file:///notes/a.txt"} {
			if _, err := l.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri}); err == nil {
				t.Errorf("%s: resources/read %s: no error", v, uri)
			}
		}
		if _, err := l.cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "greet"}); err == nil {
			t.Errorf("%s: prompts/get greet: no error", v)
		}
	}

	// A principal that may call none of up's tools sees nothing of up's.
	other := map[string]*listener{}
	for _, v := range versions {
		l := connectListener(t, base, echoToken, v)
		other[v] = l
		ctx := t.Context()
		rs, err := l.cs.ListResources(ctx, nil)
		ts, err2 := l.cs.ListResourceTemplates(ctx, nil)
		ps, err3 := l.cs.ListPrompts(ctx, nil)
		if err != nil || err2 != nil || err3 != nil || len(rs.Resources)+len(ts.ResourceTemplates)+len(ps.Prompts) != 0 {
			t.Errorf("%s: the echoer lists %+v %+v %+v (%v %v %v): want nothing", v, rs, ts, ps, err, err2, err3)
		}
		if _, err := l.cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "carmy:up/file:///notes/a.txt"}); err == nil {
			t.Errorf("%s: the echoer read up's resource", v)
		}
		if _, err := l.cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "up.greet", Arguments: map[string]string{"who": "x"}}); err == nil {
			t.Errorf("%s: the echoer got up's prompt", v)
		}
	}

	// The upstream gains a tool: its list_changed reaches Carmy, which
	// lists again and tells its own clients that listen.
	up.AddTool(&sdk.Tool{Name: "b", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
	for _, v := range versions {
		l := all[v]
		testutil.WaitFor(t, 30*time.Second, v+": tools/list_changed", func() error {
			if l.tools.Load() == 0 {
				return errNotYet
			}
			return nil
		})
		lt, err := l.cs.ListTools(t.Context(), nil)
		if err != nil || !slices.ContainsFunc(lt.Tools, func(tl *sdk.Tool) bool { return tl.Name == "up.b" }) {
			t.Errorf("%s: after list_changed, tools/list: %v %v", v, lt, err)
		}
	}
	// … and a resource and a prompt.
	up.AddResource(&sdk.Resource{Name: "c", URI: "file:///notes/c.txt"}, func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
		return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: "file:///notes/c.txt", Text: "c"}}}, nil
	})
	up.AddPrompt(&sdk.Prompt{Name: "bye"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{}}, nil
	})
	for _, v := range versions {
		l := all[v]
		testutil.WaitFor(t, 30*time.Second, v+": resources and prompts list_changed", func() error {
			if l.resources.Load() == 0 || l.prompts.Load() == 0 {
				return errNotYet
			}
			rs, err := l.cs.ListResources(t.Context(), nil)
			ps, err2 := l.cs.ListPrompts(t.Context(), nil)
			if err != nil || err2 != nil || len(rs.Resources) != 2 || len(ps.Prompts) != 2 {
				return errNotYet
			}
			return nil
		})
	}
	// The echoer's view never changed: it was told nothing (had it been,
	// the notification would have been sent with the others').
	for _, v := range versions {
		if n := other[v].tools.Load() + other[v].resources.Load() + other[v].prompts.Load(); n != 0 {
			t.Errorf("%s: the echoer got %d list_changed notifications", v, n)
		}
	}
}

var errNotYet = errors.New("not yet")
