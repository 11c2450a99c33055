package ui_test

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store/audit"
	"github.com/carmyhq/carmy/tests/testutil"
)

// ledgerRun pages through the export files given (one per page of GET
// /v1/audit, an empty one last) with the console's ledger.js and prints
// its verdict.
const ledgerRun = `import { readFileSync } from 'node:fs';
const { verify } = await import('./ledger.js');
for (const name of process.argv.slice(2)) {
  const pages = readFileSync(name, 'utf8').split('\n--page--\n');
  let i = 0;
  const r = await verify(async () => pages[i++] || '');
  console.log(JSON.stringify(r));
}
`

// TestConsoleVerifiesLedger runs the console's verification (ledger.js)
// under Node.js on exports the Go ledger wrote — with special characters
// and a checkpoint entry, in two pages, the second starting with its
// anchor line — and on one with an entry changed: the first verifies to
// its head, the second names the changed seq. Skipped without node.
func TestConsoleVerifiesLedger(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.SkipLoudly(t, "node is not on PATH: the console's ledger check runs under Node.js")
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	var entries []audit.Entry
	h := audit.Start
	at := time.Date(2026, 12, 6, 2, 0, 0, 123456789, time.UTC)
	for i := range 5 {
		var e audit.Entry
		e, h = h.Next(audit.Draft{Time: at.Add(time.Duration(i) * time.Second), Kind: audit.KindReserved,
			ExecutionID: fmt.Sprint("exec_", i), Principal: "ålice\"<&>\u2028\x01", Actor: "ålice", Tool: "echo", Status: "running"}, nil)
		entries = append(entries, e)
		if i == 2 {
			s := audit.Sign(key, h)
			e, h = h.Next(audit.Draft{Time: at, Kind: audit.KindCheckpoint, Actor: "n1", Checkpoint: &s}, nil)
			entries = append(entries, e)
		}
	}
	export := func(es []audit.Entry) []byte {
		var page1, page2 []byte
		for _, e := range es[:3] {
			page1 = e.Line(page1)
		}
		page2 = audit.CheckpointLine(page2, audit.Head{Seq: es[2].Seq, Hash: es[2].Hash})
		for _, e := range es[3:] {
			page2 = e.Line(page2)
		}
		return bytes.Join([][]byte{page1, page2, nil}, []byte("\n--page--\n"))
	}
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("static", "ledger.js"))
	if err != nil {
		t.Fatal(err)
	}
	tampered := append([]audit.Entry(nil), entries...)
	tampered[4].Principal = "mallory" // seq 5, its hash left as it was
	for name, b := range map[string][]byte{"ledger.js": src, "run.mjs": []byte(ledgerRun), "good": export(entries), "bad": export(tampered)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(node, "run.mjs", "good", "bad")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("node printed %q, want 2 lines", out)
	}
	if want := fmt.Sprintf(`{"ok":true,"entries":6,"anchor":null,"head":{"seq":6,"hash":%q}}`, h.Hash); lines[0] != want {
		t.Errorf("the good export: %s\nwant %s", lines[0], want)
	}
	if !strings.Contains(lines[1], `"ok":false`) || !strings.Contains(lines[1], `"bad":{"seq":5,"reason":"hash does not match the entry"}`) {
		t.Errorf("the tampered export: %s; want seq 5 named", lines[1])
	}
}
