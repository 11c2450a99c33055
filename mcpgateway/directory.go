package mcpgateway

import (
	"context"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Directory is what the upstreams of a node offer besides tools, for the
// /mcp endpoint to pass through (passthrough.go), and the signal that any
// of their lists (tools included) may have changed. Build it with
// NewDirectory before the upstreams Start. Safe for concurrent use.
//
// Every method takes see, which tells whether the caller may see an
// upstream's resources and prompts (by the upstream's name): what it may
// not see is neither listed nor forwarded.
type Directory struct {
	ups     []*Upstream
	byName  map[string]*Upstream
	gen     atomic.Uint64
	changed chan struct{}
}

// NewDirectory returns the directory of ups, which report every listing
// to it from then on.
func NewDirectory(ups []*Upstream) *Directory {
	d := &Directory{ups: ups, byName: make(map[string]*Upstream, len(ups)), changed: make(chan struct{}, 1)}
	for _, u := range ups {
		d.byName[u.cfg.Name] = u
		u.listed.Store(&listedHook{d: d})
	}
	return d
}

// listedHook is how an upstream reports a listing to its directory.
type listedHook struct{ d *Directory }

// listed is told after each successful listing of an upstream, and
// whether its resources, templates or prompts changed.
func (d *Directory) listed(changed bool) {
	if changed {
		d.gen.Add(1)
	}
	select {
	case d.changed <- struct{}{}:
	default: // one is pending already
	}
}

// Changed is signalled after an upstream was listed (its tools may have
// changed too: see engine.Runtime.ToolsGeneration). One reader.
func (d *Directory) Changed() <-chan struct{} { return d.changed }

// Generation changes whenever an upstream's resources, templates or
// prompts change.
func (d *Directory) Generation() uint64 { return d.gen.Load() }

// Offers reports whether some upstream declares resources, and prompts.
func (d *Directory) Offers() (resources, prompts bool) {
	for _, u := range d.ups {
		l := u.currentLists()
		resources = resources || l.hasResources
		prompts = prompts || l.hasPrompts
	}
	return resources, prompts
}

// Resources lists the resources of the upstreams the caller may see.
func (d *Directory) Resources(see func(server string) bool) []*mcp.Resource {
	out := []*mcp.Resource{}
	for _, u := range d.visible(see) {
		out = append(out, u.currentLists().resources...)
	}
	return out
}

// ResourceTemplates lists the resource templates of the upstreams the
// caller may see.
func (d *Directory) ResourceTemplates(see func(server string) bool) []*mcp.ResourceTemplate {
	out := []*mcp.ResourceTemplate{}
	for _, u := range d.visible(see) {
		out = append(out, u.currentLists().templates...)
	}
	return out
}

// Prompts lists the prompts of the upstreams the caller may see.
func (d *Directory) Prompts(see func(server string) bool) []*mcp.Prompt {
	out := []*mcp.Prompt{}
	for _, u := range d.visible(see) {
		out = append(out, u.currentLists().prompts...)
	}
	return out
}

// ReadResource forwards a resources/read of uri (carmy:<server>/<upstream
// URI>) to its upstream, or answers ErrNotFound when uri names no
// upstream the caller may see.
func (d *Directory) ReadResource(ctx context.Context, uri string, see func(server string) bool) (*mcp.ReadResourceResult, error) {
	server, own, ok := SplitURI(uri)
	u := d.byName[server]
	if !ok || u == nil || !see(server) {
		return nil, ErrNotFound
	}
	return u.readResource(ctx, own)
}

// GetPrompt forwards a prompts/get of name (<server>.<prompt>) to its
// upstream, or answers ErrNotFound when name names no upstream the caller
// may see.
func (d *Directory) GetPrompt(ctx context.Context, name string, args map[string]string, see func(server string) bool) (*mcp.GetPromptResult, error) {
	server, own, ok := SplitName(name)
	u := d.byName[server]
	if !ok || u == nil || !see(server) {
		return nil, ErrNotFound
	}
	return u.getPrompt(ctx, own, args)
}

// visible returns the upstreams the caller may see, in the configured
// order.
func (d *Directory) visible(see func(server string) bool) []*Upstream {
	out := make([]*Upstream, 0, len(d.ups))
	for _, u := range d.ups {
		if see(u.cfg.Name) {
			out = append(out, u)
		}
	}
	return out
}
