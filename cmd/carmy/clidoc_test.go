package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/internal/bench"
)

// TestCLIDocListsEveryFlag keeps docs/cli.md complete: its section of
// carmy serve names every flag of serve's flag set, and its sections of
// carmy bench and carmy traces every flag of theirs (and their help does
// too).
func TestCLIDocListsEveryFlag(t *testing.T) {
	raw, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	var cfg serveConfig
	var serveNames []string
	serveFlags(&cfg, &bytes.Buffer{}).VisitAll(func(f *flag.Flag) { serveNames = append(serveNames, f.Name) })
	var tracesNames []string
	tracesFlags(&tracesConfig{}).VisitAll(func(f *flag.Flag) { tracesNames = append(tracesNames, f.Name) })
	for _, c := range []struct {
		section string
		flags   []string
	}{
		{"## `carmy serve`", serveNames},
		{"## `carmy bench`", bench.FlagNames()},
		{"## `carmy traces`", tracesNames},
	} {
		text := docSection(string(raw), c.section)
		if text == "" {
			t.Fatalf("docs/cli.md has no section %q", c.section)
		}
		for _, name := range c.flags {
			if !strings.Contains(text, "`--"+name) {
				t.Errorf("docs/cli.md, section %s, does not list --%s", c.section, name)
			}
		}
	}
	for _, name := range bench.FlagNames() {
		if !strings.Contains(bench.Usage, "  --"+name+" ") {
			t.Errorf("carmy bench --help does not list --%s", name)
		}
	}
	for _, name := range tracesNames {
		if !strings.Contains(tracesUsage, "  --"+name+" ") {
			t.Errorf("carmy traces --help does not list --%s", name)
		}
	}
}

// docSection returns the text of markdown from the heading line to the
// next heading of the same level, or "".
func docSection(markdown, heading string) string {
	_, rest, ok := strings.Cut(markdown, "\n"+heading+"\n")
	if !ok {
		return ""
	}
	level := heading[:strings.IndexByte(heading, ' ')+1]
	if i := strings.Index(rest, "\n"+level); i >= 0 {
		rest = rest[:i]
	}
	return rest
}
