package mcp

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/jsonscan"
)

// catalog mirrors the runtime's tools into the SDK's server, so that
// tools/list shows them with their own schemas and tools/call reaches
// them. It re-reads the runtime only when ToolsGeneration changed: a
// tool registered later (an upstream MCP server's, docs/mcp.md#carmy-in-front-of-mcp-servers-the-gateway) is served
// from the next request on.
type catalog struct {
	rt     Runtime
	server *sdk.Server
	call   sdk.ToolHandler
	log    *slog.Logger

	mu   sync.Mutex
	gen  uint64
	have map[string]bool
	// headerBound holds the tools whose input schema may bind an argument
	// to an HTTP header (x-mcp-header), which the SDK checks from
	// 2026-07-28 on: the fast path leaves their calls to it (fastCallable).
	headerBound map[string]bool
	// primed is false until the first sync, which then runs whatever the
	// generation (a runtime without tools is at generation 0).
	primed bool
}

func newCatalog(rt Runtime, server *sdk.Server, call sdk.ToolHandler, log *slog.Logger) *catalog {
	c := &catalog{rt: rt, server: server, call: call, log: log, have: make(map[string]bool)}
	c.sync()
	return c
}

// sync brings the server's tools up to the runtime's.
func (c *catalog) sync() {
	gen := c.rt.ToolsGeneration()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.primed && gen == c.gen {
		return
	}
	tools := c.rt.Tools()
	seen := make(map[string]bool, len(tools)+len(reconcileTools))
	bound := map[string]bool{}
	for _, t := range reconcileTools {
		seen[t.Name] = true
		if !c.have[t.Name] {
			c.server.AddTool(t, c.call)
		}
	}
	for _, t := range tools {
		seen[t.Name] = true
		mt := toolOf(t, c.log)
		if mayBindHeaders(mt) {
			bound[t.Name] = true
		}
		c.server.AddTool(mt, c.call)
	}
	var gone []string
	for name := range c.have {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		c.server.RemoveTools(gone...)
	}
	c.have, c.headerBound, c.gen, c.primed = seen, bound, gen, true
}

// fastCallable reports whether the fast path may serve a call of the tool
// name at 2026-07-28: the tool is unknown (the SDK answers -32602 after
// the same header checks), or its schema binds no argument to a header.
func (c *catalog) fastCallable(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.headerBound[name]
}

// mayBindHeaders reports whether t's input schema may hold an
// x-mcp-header annotation: it names one, or holds an escape that could
// spell one (HTML's characters stay as they are, not escaped).
func mayBindHeaders(t *sdk.Tool) bool {
	raw, err := jsonscan.MarshalNoHTML(t.InputSchema)
	return err != nil || bytes.Contains(raw, []byte("x-mcp-header")) || bytes.Contains(raw, []byte(`\u`))
}

// allowed returns the tools of list that caller may call: those of
// Runtime.ToolsFor (the set GET /v1/tools shows), and the reconcile tools
// (reconcile.go), which every caller may call. A caller unknown (nil) is
// shown none.
func (c *catalog) allowed(caller *engine.Caller, list []*sdk.Tool) []*sdk.Tool {
	if caller == nil {
		return []*sdk.Tool{}
	}
	tools := c.rt.ToolsFor(*caller)
	may := make(map[string]bool, len(tools))
	for _, t := range tools {
		may[t.Name] = true
	}
	out := make([]*sdk.Tool, 0, len(list))
	for _, t := range list {
		if may[t.Name] || isReconcileTool(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// toolOf describes t as MCP does. The input schema is the tool's own, as
// GET /v1/tools shows it ({"type":"object"} when it has none); MCP needs
// its type to be "object", which every call's arguments are anyway: a
// schema that names no type is given that one. Its title, output schema
// and _meta are passed on as they are (an upstream MCP server's), but
// for the _meta keys beginning "carmy/", which are Carmy's own: a tool's
// never stand for them.
func toolOf(t engine.ToolInfo, log *slog.Logger) *sdk.Tool {
	schema := json.RawMessage(`{"type":"object"}`)
	if len(t.InputSchema) > 0 {
		var m map[string]any
		switch err := json.Unmarshal(t.InputSchema, &m); {
		case err != nil:
			log.Warn("mcp: a tool's input schema is not a JSON object; listing it as {\"type\":\"object\"}", slog.String("tool", t.Name))
		case m["type"] == "object":
			schema = t.InputSchema
		default:
			if m["type"] != nil {
				log.Warn("mcp: a tool's input schema has a type other than \"object\"; listing it as an object", slog.String("tool", t.Name))
			}
			m["type"] = "object"
			if b, err := json.Marshal(m); err == nil {
				schema = b
			}
		}
	}
	out := &sdk.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: schema}
	if len(t.OutputSchema) > 0 {
		out.OutputSchema = t.OutputSchema
	}
	if len(t.Meta) > 0 {
		var m sdk.Meta
		if err := json.Unmarshal(t.Meta, &m); err != nil {
			log.Warn("mcp: a tool's _meta is not a JSON object; not listing it", slog.String("tool", t.Name), slog.Any("err", err))
		}
		for k := range m {
			if strings.HasPrefix(k, metaPrefix) {
				delete(m, k)
			}
		}
		if len(m) > 0 {
			out.Meta = m
		}
	}
	if len(t.Annotations) > 0 {
		var a sdk.ToolAnnotations
		if err := json.Unmarshal(t.Annotations, &a); err == nil {
			out.Annotations = &a
		} else {
			log.Warn("mcp: a tool's annotations do not read as MCP's; not listing them", slog.String("tool", t.Name), slog.Any("err", err))
		}
	}
	return out
}
