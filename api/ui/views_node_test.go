package ui_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// domShim is the least of a DOM views.js needs to build elements under
// Node.js; an element's text is its children's, in order.
const domShim = `class El { constructor(t) { this.kids = []; } setAttribute() {} addEventListener() {}
  append(...k) { this.kids.push(...k); } get text() { return this.kids.map((k) => typeof k === 'string' ? k : k.text).join(''); } }
globalThis.document = { createElement: (t) => new El(t), createElementNS: (_, t) => new El(t), getElementById: () => null };
const { cluster } = await import('./views.js');
const base = { commit_index: 1, applied_index: 1, entries: 0, capacity: 10, leader: { id: 'n1' } };
const show = (c) => console.log(cluster(c, () => {}).map((e) => e.text).join(' | '));
show({ ...base, nodes: [{ id: 'n1', version: 'v1.2.0' }, { id: 'n2', version: 'v1.2.0' }] });
show({ ...base, nodes: [{ id: 'n1', version: 'v1.2.0' }, { id: 'n2', version: 'v1.3.0' }, { id: 'n3', version: 'v1.2.0' }] });
show({ ...base, store: 'postgres', database: { reachable: true }, nodes: [{ id: 'a', version: 'v1.2.0', heartbeat: 'alive' }, { id: 'b', version: 'v1.3.0', heartbeat: 'alive' }] });
`

// TestClusterViewShowsVersions runs the console's cluster view under
// Node.js: each node's version is shown, and a cluster whose nodes run
// different versions is flagged, naming which runs what. Skipped without
// node on PATH.
func TestClusterViewShowsVersions(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.SkipLoudly(t, "node is not on PATH: the console's views are checked under Node.js")
	}
	dir := t.TempDir()
	for _, f := range []string{"views.js", "dom.js", "approvals.js"} {
		b, err := os.ReadFile(filepath.Join("static", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "run.mjs"), []byte(domShim), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, filepath.Join(dir, "run.mjs")).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 {
		t.Fatalf("node printed %d lines, want 3:\n%s", len(lines), out)
	}
	same, mixed, fleet := lines[0], lines[1], lines[2]
	if !strings.Contains(same, "Versionv1.2.0") || strings.Contains(same, "mixed") || strings.Count(same, "v1.2.0") != 3 {
		t.Errorf("one version: %q; want the version as a fact and in each node's row, not flagged", same)
	}
	for _, want := range []string{"mixed versions", "v1.2.0 (n1, n3)", "v1.3.0 (n2)"} {
		if !strings.Contains(mixed, want) {
			t.Errorf("mixed versions: %q lacks %q", mixed, want)
		}
	}
	if !strings.Contains(fleet, "mixed versions v1.2.0 (a); v1.3.0 (b)") {
		t.Errorf("a fleet of mixed versions: %q; want it flagged", fleet)
	}
}
