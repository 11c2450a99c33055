package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// shared is the one build of cmd/carmy of a test process whose TestMain
// runs through Main: its directory, and the binary or the build's error
// once built.
var shared struct {
	mu  sync.Mutex
	dir string // "" unless Main runs the tests
	bin string
	err error
}

// Main runs a package's tests (call it from TestMain) so that BuildCarmy
// builds cmd/carmy once for all of them, and removes that build when they
// end. It does not return: it exits with m.Run's status.
func Main(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "carmy-test-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "testutil.Main: a directory for the shared build: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	shared.mu.Lock()
	shared.dir = dir
	shared.mu.Unlock()
	return m.Run()
}

// BuildCarmy builds cmd/carmy (without the race detector) and returns the
// binary's path. Under Main the first call builds it and every test of the
// process gets that one binary (callers only run it, never change or
// remove it); without Main each call builds its own into the test's
// temporary directory.
func BuildCarmy(tb testing.TB) string {
	tb.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.dir == "" {
		bin, err := buildCarmy(tb, tb.TempDir())
		if err != nil {
			tb.Fatal(err)
		}
		return bin
	}
	if shared.bin == "" && shared.err == nil {
		shared.bin, shared.err = buildCarmy(tb, shared.dir)
	}
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.bin
}

// buildCarmy runs `go build -o dir/carmy ./cmd/carmy` in the module's root.
func buildCarmy(tb testing.TB, dir string) (string, error) {
	tb.Helper()
	bin := filepath.Join(dir, "carmy")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/carmy")
	cmd.Dir = ModuleRoot(tb)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building carmy: %w\n%s", err, out)
	}
	return bin, nil
}
