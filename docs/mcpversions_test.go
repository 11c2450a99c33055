package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/internal/mcpversion"
)

// TestMCPVersionsTable: the table of "Protocol versions" in mcp.md is
// internal/mcpversion's, row for row and feature for feature, and the
// text names its newest and unstated versions.
func TestMCPVersionsTable(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Protocol versions\n")
	if !ok {
		t.Fatal(`mcp.md has no "## Protocol versions" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| 20") {
			rows = append(rows, line)
		}
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return ""
	}
	var want []string
	for _, f := range mcpversion.Table() {
		tasks := ""
		switch {
		case f.TasksCore:
			tasks = "core"
		case f.TasksExtension:
			tasks = "extension"
		}
		cells := []string{f.Version, yes(f.Batches), yes(f.FastPath), tasks, yes(f.Stateless), yes(f.ClosedStreamCancels)}
		want = append(want, strings.TrimSpace(strings.ReplaceAll("| "+strings.Join(cells, " | ")+" |", "  ", " ")))
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("mcp.md's table of protocol versions:\n%s\nwant (internal/mcpversion):\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range []string{"the newest " + mcpversion.Latest, "is read as " + mcpversion.Unstated} {
		if !strings.Contains(strings.Join(strings.Fields(section), " "), s) {
			t.Errorf("mcp.md's section on protocol versions does not say %q", s)
		}
	}
}
