package ui_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// approvalsShim runs approvals.js under the DOM shim of views_node_test.go
// and prints one line per case.
const approvalsShim = `class El { constructor(t) { this.tag = t; this.kids = []; this.attrs = {}; } setAttribute(k, v) { this.attrs[k] = v; } addEventListener() {}
  append(...k) { this.kids.push(...k); } get text() { return this.kids.map((k) => typeof k === 'string' ? k : k.text).join(''); } }
globalThis.document = { createElement: (t) => new El(t), createElementNS: (_, t) => new El(t), getElementById: () => null };
const a = await import('./approvals.js');
const now = Date.parse('2026-01-01T00:00:00Z');
const at = (s) => new Date(now + s * 1000).toISOString();
console.log([a.timeLeft(at(-1), now), a.timeLeft(at(42), now), a.timeLeft(at(3599), now), a.timeLeft(at(3 * 3600 + 120), now), a.timeLeft(at(5 * 86400), now)].join(' | '));
const long = { items: Array.from({ length: 40 }, (_, i) => 'line-' + i) };
const el = (v, expanded) => a.args(v, { expanded, toggle() {}, key: 'k', label: 'l' });
console.log([el({ x: '<b>' }, false).tag, el({ x: '<b>' }, false).text, el(long, false).text.includes('line-39'), el(long, true).text.includes('line-39'),
  el(long, false).kids[1].attrs['aria-expanded']].join(' | '));
const step = (label, when, text) => label + ': ' + text;
const gated = (d) => ({ execution_id: 'e', approval: { approvers: ['bob'], expires_at: at(60), decision: d } });
for (const d of [undefined, { status: 'running', by: 'bob', at: at(1) }, { status: 'denied', by: 'admin', reason: 'no', at: at(1) }, { status: 'expired', by: 'n1', at: at(61) }]) {
  const s = a.steps(gated(d), step);
  console.log(s.items.join(' / ') + ' | finished ' + s.finished);
}
console.log(a.approversText({ approval: { approvers: [] } }) + ' | ' + a.approversText(gated()));
`

// TestApprovalViews runs the console's approval views under Node.js: the
// time left before a gate expires, arguments as JSON text (long ones cut
// short until expanded), the timeline's steps of a gated call for each
// decision, and who may decide. Skipped without node on PATH.
func TestApprovalViews(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.SkipLoudly(t, "node is not on PATH: the console's views are checked under Node.js")
	}
	dir := t.TempDir()
	for _, f := range []string{"approvals.js", "dom.js"} {
		b, err := os.ReadFile(filepath.Join("static", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "run.mjs"), []byte(approvalsShim), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, filepath.Join(dir, "run.mjs")).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{
		"expired: it is recorded expired within a few seconds | 42 s left | 59 min left | 3 h 2 min left | 5 days left",
		"pre | {\n  \"x\": \"<b>\"\n} | false | true | false",
		"awaiting: awaiting approval by bob (or the admin), until ", // then the date in the reader's locale
		"approved: approved by bob; the tool runs once | finished false",
		"denied: denied by admin: “no”; the tool did not run | finished true",
		"expired: no one decided before the approval expired; the tool did not run | finished true",
		"the admin | bob (or the admin)",
	}
	if len(got) != 9 {
		t.Fatalf("node printed %d lines, want 9:\n%s", len(got), out)
	}
	// The JSON of the second line spans three lines of output.
	got = append([]string{got[0], strings.Join(got[1:4], "\n")}, got[4:]...)
	for i := range want {
		ok := got[i] == want[i]
		if i == 2 {
			ok = strings.HasPrefix(got[i], want[i]) && strings.HasSuffix(got[i], ": the tool has not run | finished false")
		}
		if !ok {
			t.Errorf("line %d: %q, want %q", i, got[i], want[i])
		}
	}
}
