package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/egress"
	"github.com/carmyhq/carmy/store"
)

// An upstream's resources, resource templates and prompts pass through
// the gateway read-only: they are listed with the tools (on connecting,
// on notifications/tools|resources|prompts/list_changed and every
// RefreshInterval), when the upstream declares the capability, and
// resources/read and prompts/get are forwarded to the upstream as they
// come, bounded as a tool's answer is (Config.MaxAnswerBytes) and
// redacted of the configured secrets. Nothing is recorded: they are not
// calls.
//
// Names never collide across upstreams: a prompt is named
// <server>.<prompt>, as a tool is, and a resource's URI (and a
// template's) is carmy:<server>/<upstream URI>, which the gateway strips
// before it forwards a read. The prefix is a plain string, so that a
// template expands to a URI that carries it too.

// URIPrefix is the prefix of the URIs of server's resources as Carmy
// lists them: carmy:<server>/.
func URIPrefix(server string) string { return uriScheme + server + "/" }

const uriScheme = "carmy:"

// SplitURI returns the server and the upstream's own URI of a URI that
// URIPrefix made; ok is false for any other.
func SplitURI(uri string) (server, upstream string, ok bool) {
	rest, found := strings.CutPrefix(uri, uriScheme)
	if !found {
		return "", "", false
	}
	server, upstream, found = strings.Cut(rest, "/")
	if !found || !upstreamName.MatchString(server) {
		return "", "", false
	}
	return server, upstream, true
}

// SplitName returns the server and the upstream's own name of a prompt
// named <server>.<prompt>.
func SplitName(name string) (server, upstream string, ok bool) {
	server, upstream, ok = strings.Cut(name, ".")
	return server, upstream, ok && upstream != "" && upstreamName.MatchString(server)
}

// maxListed bounds the resources, the templates and the prompts kept of
// one upstream, each; the rest are left out, with a warning.
const maxListed = 10000

// lists is what an upstream offers besides tools, named as Carmy shows it.
type lists struct {
	resources []*mcp.Resource
	templates []*mcp.ResourceTemplate
	prompts   []*mcp.Prompt
	// hasResources and hasPrompts tell whether the upstream declared the
	// capability.
	hasResources, hasPrompts bool
}

// refreshLists lists the upstream's resources, templates and prompts (those
// its capabilities declare) and keeps them, and reports whether they
// changed. A method the upstream answers with a JSON-RPC error (no
// resources/templates/list, say) lists nothing; a listing that gets no
// answer fails.
func (u *Upstream) refreshLists(ctx context.Context, cs *mcp.ClientSession) (bool, error) {
	var caps *mcp.ServerCapabilities
	if ir := cs.InitializeResult(); ir != nil {
		caps = ir.Capabilities
	}
	var next lists
	prefix := URIPrefix(u.cfg.Name)
	if caps != nil && caps.Resources != nil {
		next.hasResources = true
		rs, err := listAll(u, "resources", cs.Resources(ctx, nil))
		if err != nil {
			return false, err
		}
		for _, r := range rs {
			r.URI = prefix + r.URI
		}
		ts, err := listAll(u, "resource templates", cs.ResourceTemplates(ctx, nil))
		if err != nil {
			return false, err
		}
		for _, t := range ts {
			t.URITemplate = prefix + t.URITemplate
		}
		next.resources, next.templates = rs, ts
	}
	if caps != nil && caps.Prompts != nil {
		next.hasPrompts = true
		ps, err := listAll(u, "prompts", cs.Prompts(ctx, nil))
		if err != nil {
			return false, err
		}
		for _, p := range ps {
			p.Name = u.cfg.Name + "." + p.Name
		}
		next.prompts = ps
	}
	u.listsMu.Lock()
	defer u.listsMu.Unlock()
	changed := !sameLists(u.lists, next)
	u.lists = next
	return changed, nil
}

// listAll collects a listing, up to maxListed entries.
func listAll[T any](u *Upstream, what string, seq func(func(T, error) bool)) ([]T, error) {
	out := []T{}
	for v, err := range seq {
		if err != nil {
			var we *jsonrpc.Error
			if errors.As(err, &we) && !localCode(we.Code) {
				u.log.Debug("mcp server: not listed", slog.String("what", what), slog.Int64("rpc_code", we.Code))
				return []T{}, nil
			}
			return nil, fmt.Errorf("listing %s: %w", what, err)
		}
		if len(out) == maxListed {
			u.log.Warn("mcp server: too many to list; the rest are left out", slog.String("what", what), slog.Int("kept", maxListed))
			break
		}
		out = append(out, v)
	}
	return out, nil
}

// sameLists reports whether a and b list the same.
func sameLists(a, b lists) bool {
	ja, err1 := json.Marshal([]any{a.resources, a.templates, a.prompts, a.hasResources, a.hasPrompts})
	jb, err2 := json.Marshal([]any{b.resources, b.templates, b.prompts, b.hasResources, b.hasPrompts})
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// currentLists returns what the upstream offers now, as last listed
// (kept while it is unreachable, as its tools are).
func (u *Upstream) currentLists() lists {
	u.listsMu.Lock()
	defer u.listsMu.Unlock()
	return u.lists
}

// ErrNotFound is the error of a read or a get naming no upstream of the
// directory that the caller may see (code NOT_FOUND).
var ErrNotFound = store.NewError(store.CodeNotFound, "no such resource or prompt")

// readResource forwards a resources/read of the upstream's own uri; the
// answer's URIs are given the prefix back.
func (u *Upstream) readResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	cn := u.current()
	if cn == nil {
		return nil, u.unreachable("it is not connected")
	}
	st := &callState{}
	defer st.done.Store(true)
	res, err := cn.cs.ReadResource(withCall(ctx, st), &mcp.ReadResourceParams{URI: uri})
	if err := u.forwardErr(st, "resources/read", err); err != nil {
		return nil, err
	}
	out := new(mcp.ReadResourceResult)
	if err := u.redactInto(res, out); err != nil {
		return nil, err
	}
	prefix := URIPrefix(u.cfg.Name)
	for _, c := range out.Contents {
		if c != nil && c.URI != "" {
			c.URI = prefix + c.URI
		}
	}
	out.Cacheable = mcp.Cacheable{}
	return out, nil
}

// getPrompt forwards a prompts/get of the upstream's own prompt name.
func (u *Upstream) getPrompt(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	cn := u.current()
	if cn == nil {
		return nil, u.unreachable("it is not connected")
	}
	st := &callState{}
	defer st.done.Store(true)
	res, err := cn.cs.GetPrompt(withCall(ctx, st), &mcp.GetPromptParams{Name: name, Arguments: args})
	if err := u.forwardErr(st, "prompts/get", err); err != nil {
		return nil, err
	}
	out := new(mcp.GetPromptResult)
	if err := u.redactInto(res, out); err != nil {
		return nil, err
	}
	prefix := URIPrefix(u.cfg.Name)
	for _, m := range out.Messages {
		if m == nil {
			continue
		}
		switch c := m.Content.(type) {
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.URI != "" {
				c.Resource.URI = prefix + c.Resource.URI
			}
		case *mcp.ResourceLink:
			c.URI = prefix + c.URI
		}
	}
	return out, nil
}

// forwardErr turns what a forwarded request got instead of an answer into
// the error the caller sees: the upstream's JSON-RPC error as it is
// (redacted, cut); an answer past the bound, RESULT_TOO_LARGE; no answer,
// UNAVAILABLE. Nothing was recorded either way, so a retry is safe.
func (u *Upstream) forwardErr(st *callState, method string, err error) error {
	switch {
	case st.tooLarge.Load():
		u.log.Warn("mcp server: an answer is larger than the bound", slog.String("method", method), slog.Int("bound", u.maxAnswer))
		return store.NewError(engine.CodeResultTooLarge, fmt.Sprintf("the answer of MCP server %q is larger than %d bytes", u.cfg.Name, u.maxAnswer))
	case err == nil:
		return nil
	}
	var we *jsonrpc.Error
	if errors.As(err, &we) && !localCode(we.Code) {
		return &jsonrpc.Error{Code: we.Code, Message: clip(u.redactor.Redact(we.Message))}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	u.log.Warn("mcp server: no answer to a forwarded request", slog.String("method", method),
		slog.String("target", u.target), slog.String("err", egress.Detail(err, u.redactor)))
	return u.unreachable("no answer came: " + egress.Describe(err))
}

// redactInto passes v through redactValue into out.
func (u *Upstream) redactInto(v, out any) error {
	red, err := u.redactValue(v)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(red)
	if err == nil {
		err = json.Unmarshal(raw, out)
	}
	if err != nil {
		return fmt.Errorf("the answer of MCP server %q does not read as MCP's: %w", u.cfg.Name, err)
	}
	return nil
}

// unreachable is the UNAVAILABLE error of a forwarded request that got
// no answer.
func (u *Upstream) unreachable(why string) error {
	return store.NewError(store.CodeUnavailable, fmt.Sprintf("MCP server %q is unavailable: %s; retry later", u.cfg.Name, why))
}
