package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestAuditExportVerify: `carmy audit export` writes a running node's
// ledger, `carmy audit verify` checks it against the node's head, names
// the seq of a changed line, and accepts an export that starts after a
// seq (anchored at its checkpoint line).
func TestAuditExportVerify(t *testing.T) {
	t.Parallel() // its own process on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{}, "--dev", "--node-id", "n1", "--data-dir", filepath.Join(t.TempDir(), "n1"))
	n.WaitReady(t, 30*time.Second)
	for i := range 3 {
		call := fmt.Sprintf(`{"tool":"echo","request_id":"r%d","arguments":{"x":%d}}`, i, i)
		if code, body := bbPost(t, n.URL+"/v1/tools/call", call); code != http.StatusOK {
			t.Fatalf("call: %d %s", code, body)
		}
	}
	var head struct {
		Seq  uint64 `json:"seq"`
		Hash string `json:"hash"`
	}
	// Each call is reserved, then completed.
	testutil.WaitUntil(t, 10*time.Second, "the ledger to hold the calls", func() bool {
		code, body := bbGet(t, n.URL+"/v1/audit/head")
		return code == http.StatusOK && json.Unmarshal([]byte(body), &head) == nil && head.Seq >= 6
	})
	carmy := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		var o, e bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			code = ee.ExitCode()
		case err != nil:
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	dir := t.TempDir()
	out, errOut, code := carmy("audit", "export", "--addr", n.Addr)
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
	out, errOut, code = carmy("audit", "export", "--addr", n.Addr, "--after", "2")
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
