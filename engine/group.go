package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Tool groups: the tools of one source that the runtime learns at run time
// (an upstream MCP server's, docs/mcp.md#carmy-in-front-of-mcp-servers-the-gateway), registered and replaced together
// under one prefix. A group is named by its prefix; its tools are named
// prefix + "." + something. While a group is unavailable (its source cannot
// be listed), a call of a name under its prefix that would run the tool
// (a new identity, or none) answers the group's error before anything is
// reserved, instead of UNKNOWN_TOOL: the caller retries later, and no
// identity is spent on a call that could not run. A retry of an identity
// the store holds is answered from its record as ever (replay, conflict,
// uncertain): what was recorded does not depend on the source (Call).
//
// A group's tools are ordinary tools otherwise: they take the same path
// (validate, reserve, run, record), appear in Tools, and a call already
// past validation when the group changes runs the tool it validated.

// toolGroup is the state of one group.
type toolGroup struct {
	names []string
	// down, when not nil, answers every call under the prefix.
	down error
}

// groupOf returns the group prefix of a tool name: the part before its
// first ".", or "" when it has none.
func groupOf(name string) string {
	prefix, _, ok := strings.Cut(name, ".")
	if !ok {
		return ""
	}
	return prefix
}

// SetToolGroup replaces the tools of the group prefix with specs, and makes
// the group available (calls of a name under prefix that specs does not
// hold answer UNKNOWN_TOOL). Every spec's name must be prefix + "." + a
// non-empty rest, and must not be a tool registered otherwise (AddTool).
// On an error nothing changes. Safe for concurrent use, at any time.
func (r *Runtime) SetToolGroup(prefix string, specs []ToolSpec) error {
	if err := checkGroupPrefix(prefix); err != nil {
		return err
	}
	tools := make([]*tool, 0, len(specs))
	seen := make(map[string]bool, len(specs))
	for _, spec := range specs {
		if groupOf(spec.Name) != prefix || len(spec.Name) == len(prefix)+1 {
			return fmt.Errorf("tool group %q: tool %q is not named %s.<name>", prefix, spec.Name, prefix)
		}
		if seen[spec.Name] {
			return fmt.Errorf("tool group %q: tool %q twice", prefix, spec.Name)
		}
		seen[spec.Name] = true
		t, err := newTool(spec)
		if err != nil {
			return err
		}
		t.group = prefix
		tools = append(tools, t)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range tools {
		if old, ok := r.tools[t.Name]; ok && old.group != prefix {
			return fmt.Errorf("tool group %q: tool %q is registered already", prefix, t.Name)
		}
	}
	if r.groups == nil {
		r.groups = make(map[string]*toolGroup)
	}
	g := r.groups[prefix]
	if g == nil {
		g = &toolGroup{}
		r.groups[prefix] = g
	}
	same := r.sameListingLocked(g, tools)
	for _, name := range g.names {
		delete(r.tools, name)
	}
	g.names, g.down = g.names[:0], nil
	for _, t := range tools {
		r.tools[t.Name] = t
		g.names = append(g.names, t.Name)
	}
	if !same {
		// Readers of the tool list (the MCP catalog) rebuild only when it
		// changed, not on every periodic refresh of an upstream.
		r.toolsGen.Add(1)
	}
	return nil
}

// sameListingLocked reports whether tools list exactly as the group's
// tools do now (names in order, titles, descriptions, schemas, timeouts,
// annotations, _meta, request id rule, dedupe window, effects): replacing one by the other
// changes what a caller sees of them nowhere. r.mu is held.
func (r *Runtime) sameListingLocked(g *toolGroup, tools []*tool) bool {
	if len(g.names) != len(tools) {
		return false
	}
	for i, t := range tools {
		old, ok := r.tools[g.names[i]]
		if !ok || old.Name != t.Name || old.Description != t.Description || old.Timeout != t.Timeout ||
			old.RequireRequestID != t.RequireRequestID || old.DedupeWindow != t.DedupeWindow ||
			old.Effects != t.Effects || old.RetryUncertain != t.RetryUncertain ||
			!bytes.Equal(old.InputSchema, t.InputSchema) || !bytes.Equal(old.Annotations, t.Annotations) ||
			old.Title != t.Title || !bytes.Equal(old.OutputSchema, t.OutputSchema) || !bytes.Equal(old.Meta, t.Meta) {
			return false
		}
	}
	return true
}

// SetToolGroupUnavailable makes the group prefix unavailable: until the
// next SetToolGroup, a call of any name under prefix that would run the
// tool answers err, before anything is reserved (a retry of a recorded
// identity is answered from its record). err must carry the UNAVAILABLE
// code (a
// *store.Error of store.CodeUnavailable, say), so that the API answers
// 503 with Retry-After. The group's tools, when it had any, stay listed
// by Tools. A group unknown until now is declared (with no tools).
func (r *Runtime) SetToolGroupUnavailable(prefix string, err error) error {
	if err == nil {
		return errors.New("tool group: SetToolGroupUnavailable needs an error")
	}
	if err := checkGroupPrefix(prefix); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.groups == nil {
		r.groups = make(map[string]*toolGroup)
	}
	g := r.groups[prefix]
	if g == nil {
		g = &toolGroup{}
		r.groups[prefix] = g
	}
	g.down = err
	return nil
}

func checkGroupPrefix(prefix string) error {
	if prefix == "" || strings.Contains(prefix, ".") || !toolName.MatchString(prefix) {
		return fmt.Errorf("tool group %q: a prefix is 1-128 characters of A-Z a-z 0-9 _ : - (no \".\")", prefix)
	}
	return nil
}

// lookup returns the tool called name, or ErrUnknownTool; and, while its
// group is unavailable, the group's error (down), which refuses every call
// of it that would run it (Call). A name the unavailable group does not
// list (not listed yet on this node, or not at all) is a tool of no rules
// (any arguments, no request_id required, no dedupe window) that never
// runs: a retry of an identity the store holds is answered all the same,
// any other call is down.
func (r *Runtime) lookup(name string) (t *tool, down, err error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	prefix := groupOf(name)
	if g := r.groups[prefix]; g != nil && g.down != nil {
		down = g.down
	}
	if t, ok := r.tools[name]; ok {
		return t, down, nil
	}
	if down != nil {
		return &tool{ToolSpec: ToolSpec{Name: name, Timeout: DefaultToolTimeout}, group: prefix}, down, nil
	}
	return nil, nil, fmt.Errorf("%w: %q", ErrUnknownTool, name)
}

// CheckTool reports what AddTool or SetToolGroup would refuse in spec
// alone (its name, timeout, annotations, a schema that does not compile),
// so that a source of many tools can leave out the one that is wrong
// rather than lose them all.
func CheckTool(spec ToolSpec) error {
	_, err := newTool(spec)
	return err
}
