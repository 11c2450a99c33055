package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/engine"
)

// The names carmy and carmy.* belong to Carmy's own MCP tools (docs/mcp.md, "Reconciling from the model").
func TestReservedToolNames(t *testing.T) {
	rt := engine.New()
	f := func(context.Context, engine.Call) (any, error) { return nil, nil }
	for _, name := range []string{"carmy", "carmy.lookup", "CARMY.x", "Carmy.cancel"} {
		if err := rt.AddTool(engine.ToolSpec{Name: name, Func: f}); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("AddTool(%q): %v, want reserved", name, err)
		}
	}
	for _, name := range []string{"carmyx", "my.carmy", "carmy_tool"} {
		if err := rt.AddTool(engine.ToolSpec{Name: name, Func: f}); err != nil {
			t.Errorf("AddTool(%q): %v", name, err)
		}
	}
}
