package embed_test

// The audit ledger of a running node (docs/audit.md), read as `carmy
// audit export` reads it (GET /v1/audit) and checked as `carmy audit
// verify` checks it (audit.Verify). The CLI's own flags, output and exit
// codes are cmd/carmy's TestAuditExportVerifyCLI.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store/audit"
	"github.com/carmyhq/carmy/tests/testutil"
)

// TestAuditExportVerify: a running node's ledger, exported from its
// first entry, verifies to the node's head; a changed line is caught and
// its seq named; and an export that starts after a seq is anchored at its
// checkpoint line and verifies to the same head.
func TestAuditExportVerify(t *testing.T) {
	t.Parallel() // a node of its own on ports the kernel picks
	base, _ := startFromYAML(t, "demo_tools: true\n", withDev())
	for i := range 3 {
		call := fmt.Sprintf(`{"tool":"echo","request_id":"r%d","arguments":{"x":%d}}`, i, i)
		if code, body := testutil.Do(t, http.MethodPost, base+"/v1/tools/call", "", call); code != http.StatusOK {
			t.Fatalf("call: %d %s", code, body)
		}
	}
	var head audit.Head
	// Each call is reserved, then completed.
	testutil.WaitUntil(t, 10*time.Second, "the ledger to hold the calls", func() bool {
		code, body := testutil.Do(t, http.MethodGet, base+"/v1/audit/head", "", "")
		return code == http.StatusOK && json.Unmarshal([]byte(body), &head) == nil && head.Seq >= 6
	})
	export := func(after uint64) string {
		t.Helper()
		code, body := testutil.Do(t, http.MethodGet, fmt.Sprintf("%s/v1/audit?after=%d", base, after), "", "")
		if code != http.StatusOK {
			t.Fatalf("GET /v1/audit?after=%d: %d %s", after, code, body)
		}
		return body
	}
	out := export(0)
	if strings.Count(out, "\n") != int(head.Seq) {
		t.Fatalf("export: %d lines (head %d)\n%s", strings.Count(out, "\n"), head.Seq, out)
	}
	if v, err := audit.Verify(strings.NewReader(out)); err != nil || v.Head != head || v.Anchor != audit.Start {
		t.Fatalf("verify: %+v, %v; want from the first entry to head seq %d hash %s", v, err, head.Seq, head.Hash)
	}
	for _, s := range []string{`"kind":"reserved"`, `"kind":"completed"`, `"tool":"echo"`, `"actor":"n1"`} {
		if !strings.Contains(out, s) {
			t.Errorf("the export has no %s", s)
		}
	}

	// A changed byte in line 3 (its tool's name) is caught, and named.
	lines := strings.SplitAfter(out, "\n")
	lines[2] = strings.Replace(lines[2], `"tool":"echo"`, `"tool":"echp"`, 1)
	_, err := audit.Verify(strings.NewReader(strings.Join(lines, "")))
	var bad *audit.BadError
	if !errors.As(err, &bad) || bad.Seq != 3 || bad.Line != 3 || !strings.Contains(err.Error(), "seq 3 (line 3) does not verify") {
		t.Fatalf("verify of a changed line: %v, want seq 3 (line 3) named", err)
	}
	// An export after seq 2 starts at its checkpoint, which anchors it.
	part := export(2)
	if !strings.HasPrefix(part, `{"checkpoint":{"hash":"`) {
		t.Fatalf("export after 2:\n%s", part)
	}
	if v, err := audit.Verify(strings.NewReader(part)); err != nil || v.Anchor.Seq != 2 || v.Head != head {
		t.Fatalf("verify of the part: %+v, %v; want anchored at the checkpoint of seq 2, ending at head seq %d", v, err, head.Seq)
	}
}
