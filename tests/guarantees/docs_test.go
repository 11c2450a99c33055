package guarantees_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestNotApplicableDocumented: the cells the suite does not run are the
// ones docs/testing.md lists, with the same reasons.
func TestNotApplicableDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(t), "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "| cell (route/scenario) | why it does not apply |")
	if !ok {
		t.Fatal("docs/testing.md has no table of the cells that do not apply")
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| (.+) \\|$")
	documented := map[string]string{}
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("docs/testing.md: a row not of the form | `route/scenario` | reason |: %q", line)
			continue
		}
		documented[m[1]] = m[2]
	}
	for cell, why := range notApplicable {
		if documented[cell] != why {
			t.Errorf("%s: the suite says %q, docs/testing.md %q", cell, why, documented[cell])
		}
	}
	for cell := range documented {
		if _, ok := notApplicable[cell]; !ok {
			t.Errorf("docs/testing.md lists %s, which the suite runs", cell)
		}
	}
}

// TestEveryScenarioCited: docs/guarantees.md names every scenario of the
// suite as evidence of a guarantee, and no scenario the suite lacks.
func TestEveryScenarioCited(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testutil.ModuleRoot(t), "docs", "guarantees.md"))
	if err != nil {
		t.Fatal(err)
	}
	cited := map[string]bool{}
	for _, m := range regexp.MustCompile(`\*Checked by\* ([^\n]+(?:\n  [^\n]+)*)`).FindAllStringSubmatch(string(raw), -1) {
		for _, name := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(m[1], -1) {
			cited[name[1]] = true
		}
	}
	known := map[string]bool{}
	for _, s := range scenarios {
		known[s.name] = true
		if !cited[s.name] {
			t.Errorf("docs/guarantees.md cites no evidence from scenario %s", s.name)
		}
	}
	for name := range cited {
		if !known[name] {
			t.Errorf("docs/guarantees.md cites scenario %s, which the suite does not have", name)
		}
	}
}
