package main_test

// Black-box test of issue 14, finding 7: what `carmy serve` keeps on disk
// is private to its user.

import (
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestBlackBoxDataDirIsPrivate starts the binary on a data dir an
// operator made with a plain mkdir (0755, with a 0644 file left in it),
// makes it take a snapshot, and checks that every directory under the data
// dir is 0700 and every file 0600 (or tighter): the records, the Raft log,
// the snapshots and any key file hold tenants' data and secrets.
func TestBlackBoxDataDirIsPrivate(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the test's umask
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "left-over.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "left-over.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{}, "--dev", "--data-dir", dir,
		"--snapshot-threshold", "16", "--snapshot-interval", "100ms")
	n.WaitReady(t, 30*time.Second)
	for i := range 40 {
		status, raw := bbPost(t, n.URL+"/v1/tools/call",
			fmt.Sprintf(`{"tool":"echo","arguments":{"i":%d},"request_id":"r-%d"}`, i, i))
		if status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, status, raw)
		}
	}
	testutil.WaitFor(t, 30*time.Second, "a snapshot on disk", func() error {
		found := false
		_ = filepath.WalkDir(filepath.Join(dir, "snapshots"), func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.Name() == "state.bin" {
				found = true
			}
			return nil
		})
		if !found {
			return fmt.Errorf("no snapshots/*/state.bin yet")
		}
		return nil
	})
	checked := testutil.AssertPrivate(t, dir)
	for _, want := range []string{"raft.db", ".seg"} { // the stable store, the log's WAL
		if !strings.Contains(strings.Join(checked, " "), want) {
			t.Fatalf("no %s among the checked paths %v", want, checked)
		}
	}
	if !strings.Contains(n.Logs(), "made it private") {
		t.Errorf("the node did not warn that it tightened the data dir; logs:\n%s", n.Logs())
	}
	if err := n.Stop(15 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
