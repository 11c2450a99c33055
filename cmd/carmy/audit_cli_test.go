package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestAuditExportVerifyCLI: `carmy audit export` writes a running node's
// ledger, `carmy audit verify` checks it against the node's head (exit
// 0), names the seq of a changed line and a --head that is not the
// export's (exit 1), and accepts an export that starts after a seq
// (anchored at its checkpoint line). The commands run in process, as
// the binary runs them (run, exitCode); the ledger's own behaviour is
// embed's TestAuditExportVerify.
func TestAuditExportVerifyCLI(t *testing.T) {
	clearCarmyEnv(t)
	n := startServe(t, "--dev", "--node-id", "n1")
	n.waitReady(t)
	for i := range 3 {
		call := fmt.Sprintf(`{"tool":"echo","request_id":"r%d","arguments":{"x":%d}}`, i, i)
		if code, _, body := n.post(t, "/v1/tools/call", call); code != http.StatusOK {
			t.Fatalf("call: %d %s", code, body)
		}
	}
	var head struct {
		Seq  uint64 `json:"seq"`
		Hash string `json:"hash"`
	}
	// Each call is reserved, then completed.
	testutil.WaitUntil(t, 10*time.Second, "the ledger to hold the calls", func() bool {
		code, body := n.get(t, "/v1/audit/head", "")
		return code == http.StatusOK && json.Unmarshal([]byte(body), &head) == nil && head.Seq >= 6
	})
	carmy := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		var o, e bytes.Buffer
		code = exitCode(run(t.Context(), args, &o, &e), &e)
		return o.String(), e.String(), code
	}
	dir := t.TempDir()
	out, errOut, code := carmy("audit", "export", "--addr", n.addr)
	if code != 0 || strings.Count(out, "\n") != int(head.Seq) {
		t.Fatalf("export: exit %d, %d lines (head %d)\n%s\n%s", code, strings.Count(out, "\n"), head.Seq, out, errOut)
	}
	file := filepath.Join(dir, "ledger.ndjson")
	if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := carmy("audit", "verify", file, "--head", head.Hash); code != 0 ||
		!strings.Contains(out, fmt.Sprintf("head: seq %d hash %s", head.Seq, head.Hash)) {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, s := range []string{`"kind":"reserved"`, `"kind":"completed"`, `"tool":"echo"`, `"actor":"n1"`} {
		if !strings.Contains(out, s) {
			t.Errorf("the export has no %s", s)
		}
	}

	// A changed byte in line 3 (its tool's name) is caught, and named.
	lines := strings.SplitAfter(out, "\n")
	lines[2] = strings.Replace(lines[2], `"tool":"echo"`, `"tool":"echp"`, 1)
	bad := filepath.Join(dir, "bad.ndjson")
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := carmy("audit", "verify", bad); code != 1 || !strings.Contains(errOut, "seq 3 (line 3) does not verify") {
		t.Fatalf("verify of a changed line: exit %d\n%s", code, errOut)
	}
	// A head that is not the file's.
	if _, errOut, code := carmy("audit", "verify", file, "--head", strings.Repeat("a", 64)); code != 1 || !strings.Contains(errOut, "not the --head") {
		t.Fatalf("verify against another head: exit %d\n%s", code, errOut)
	}

	// An export after seq 2 starts at its checkpoint, which anchors it.
	out, errOut, code = carmy("audit", "export", "--addr", n.addr, "--after", "2")
	if code != 0 || !strings.HasPrefix(out, `{"checkpoint":{"hash":"`) {
		t.Fatalf("export --after 2: exit %d\n%s\n%s", code, out, errOut)
	}
	part := filepath.Join(dir, "part.ndjson")
	if err := os.WriteFile(part, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := carmy("audit", "verify", part, "--head", head.Hash); code != 0 || !strings.Contains(out, "the checkpoint of seq 2") {
		t.Fatalf("verify of the part: exit %d\n%s\n%s", code, out, errOut)
	}
}
