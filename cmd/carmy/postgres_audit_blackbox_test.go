package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestBlackBoxPostgresAuditLedger: two fleet nodes on one PostgreSQL take
// calls at once; `carmy audit export` from one node, verified by `carmy
// audit verify` against the other node's head, holds every decision of
// both in one chain; a row changed in the database makes verify name its
// seq.
func TestBlackBoxPostgresAuditLedger(t *testing.T) {
	t.Parallel()
	pg := needPostgres(t)
	bin := testutil.BuildCarmy(t)
	url := pg.URL("postgres")
	a := startFleetNode(t, bin, "a", url)
	b := startFleetNode(t, bin, "b", url)

	const calls = 20
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := []*testutil.Node{a, b}[i%2]
			r, err := tryCall(n, "echo", fmt.Sprintf(`{"i":%d}`, i), fmt.Sprintf("ledger-%d", i))
			if err != nil || r.status != http.StatusOK {
				t.Errorf("call %d on %s: %v %d %s", i, n.ID(), err, r.status, r.body)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	type head struct {
		Seq  uint64 `json:"seq"`
		Hash string `json:"hash"`
	}
	heads := map[string]head{}
	for _, n := range []*testutil.Node{a, b} {
		code, body := do(t, http.MethodGet, n.URL+"/v1/audit/head", "")
		var h head
		if code != http.StatusOK || json.Unmarshal([]byte(body), &h) != nil {
			t.Fatalf("head of %s: %d %s", n.ID(), code, body)
		}
		heads[n.ID()] = h
	}
	// Each call is reserved, then completed: two entries, whichever node.
	if heads["a"] != heads["b"] || heads["a"].Seq != 2*calls {
		t.Fatalf("heads %v, want the same on both nodes, at seq %d", heads, 2*calls)
	}

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
	export := func() string {
		t.Helper()
		out, errOut, code := carmy("audit", "export", "--addr", a.Addr)
		if code != 0 {
			t.Fatalf("export: exit %d\n%s", code, errOut)
		}
		file := filepath.Join(t.TempDir(), "ledger.ndjson")
		if err := os.WriteFile(file, []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	file := export()
	out, errOut, code := carmy("audit", "verify", file, "--head", heads["b"].Hash)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("head: seq %d hash %s", heads["b"].Seq, heads["b"].Hash)) {
		t.Fatalf("verify: exit %d\n%s\n%s", code, out, errOut)
	}
	data, _ := os.ReadFile(file)
	for _, s := range []string{`"actor":"a"`, `"actor":"b"`, `"kind":"reserved"`, `"kind":"completed"`} {
		if !bytes.Contains(data, []byte(s)) {
			t.Errorf("the export has no %s", s)
		}
	}

	pool, err := pgxpool.New(context.Background(), pg.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = pool.Exec(context.Background(),
		`UPDATE carmy_audit SET line = convert_to(replace(convert_from(line, 'UTF8'), '"tool":"echo"', '"tool":"echp"'), 'UTF8') WHERE seq = 7`)
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := carmy("audit", "verify", export()); code != 1 || !strings.Contains(errOut, "seq 7 (line 7) does not verify") {
		t.Fatalf("verify of a changed row: exit %d\n%s", code, errOut)
	}
}
