package engine_test

import (
	"context"
	"slices"
	"testing"

	"github.com/carmyhq/carmy/engine"
)

// TestToolsFor: a caller without an allow-list is shown every tool, one
// with a list those on it (names it lists that are no tool are not
// shown), sorted by name, and an empty list shows none.
func TestToolsFor(t *testing.T) {
	rt := engine.New()
	for _, name := range []string{"zeta", "alpha", "srv.read", "srv.write"} {
		if err := rt.AddTool(engine.ToolSpec{Name: name, Func: func(context.Context, engine.Call) (any, error) { return nil, nil }}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(c engine.Caller) []string {
		var out []string
		for _, ti := range rt.ToolsFor(c) {
			out = append(out, ti.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		tools *engine.ToolSet
		want  []string
	}{
		{"no allow-list", nil, []string{"alpha", "srv.read", "srv.write", "zeta"}},
		{"an allow-list", engine.NewToolSet("zeta", "srv.read", "missing"), []string{"srv.read", "zeta"}},
		{"an empty allow-list", engine.NewToolSet(), nil},
	} {
		if got := names(engine.Caller{Principal: "p", Tools: tc.tools}); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ToolsFor = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := len(rt.Tools()); got != 4 {
		t.Errorf("Tools after ToolsFor: %d tools, want 4 (ToolsFor must not change what Tools holds)", got)
	}
}

// TestCallerMaySeeServer: every server for a caller without an
// allow-list; with one, the servers it names a tool of ("<server>.").
func TestCallerMaySeeServer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tools  *engine.ToolSet
		server string
		sees   bool
	}{
		{"no allow-list", nil, "srv", true},
		{"a tool of the server", engine.NewToolSet("srv.read"), "srv", true},
		{"no tool of the server", engine.NewToolSet("echo", "other.read"), "srv", false},
		{"a prefix of a name is no server", engine.NewToolSet("srvx.read"), "srv", false},
		{"an empty allow-list", engine.NewToolSet(), "srv", false},
	} {
		if got := (engine.Caller{Principal: "p", Tools: tc.tools}).MaySeeServer(tc.server); got != tc.sees {
			t.Errorf("%s: MaySeeServer(%q) = %v, want %v", tc.name, tc.server, got, tc.sees)
		}
	}
}
