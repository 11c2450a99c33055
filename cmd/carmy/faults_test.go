package main

import (
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// stubPeer stands for the node's peer handler.
type stubPeer struct{ paths []string }

func (s *stubPeer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.paths = append(s.paths, r.URL.Path)
	w.WriteHeader(http.StatusTeapot)
}

func TestWithFaultControlWithoutFaults(t *testing.T) {
	peer := &stubPeer{}
	if h := withFaultControl(peer, nil, "k"); h != http.Handler(peer) {
		t.Fatalf("without a fault layer the peer handler is wrapped (%T)", h)
	}
}

// The default binary links no fault-injection code (docs/testing.md): not
// one symbol of internal/faultnet, which only -tags carmyfaults brings in.
func TestDefaultBinaryLinksNoFaultLayer(t *testing.T) {
	t.Parallel()
	const pkg = "github.com/carmyhq/carmy/internal/faultnet."
	if n := faultnetSymbols(t, testutil.BuildCarmy(t)); n != 0 {
		t.Fatalf("the default binary has %d symbols of %s", n, strings.TrimSuffix(pkg, "."))
	}
	if n := faultnetSymbols(t, buildCarmyTagged(t, "carmyfaults")); n == 0 {
		t.Fatal("the carmyfaults binary has no faultnet symbol: the check above proves nothing")
	}
}

// buildCarmyTagged builds cmd/carmy with -tags tags into the test's
// temporary directory.
func buildCarmyTagged(t *testing.T, tags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "carmy")
	build := exec.CommandContext(t.Context(), "go", "build", "-tags", tags, "-o", bin, "./cmd/carmy")
	build.Dir = testutil.ModuleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", tags, err, out)
	}
	return bin
}

// faultnetSymbols counts the symbols `go tool nm` lists in
// internal/faultnet in the binary bin.
func faultnetSymbols(t *testing.T, bin string) int {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	n := 0
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "carmy/internal/faultnet.") {
			n++
		}
	}
	return n
}

// clusterKeyHeader carries the cluster key of node-to-node requests and of
// the fault control.
const clusterKeyHeader = "Carmy-Cluster-Key"

// getFaults sends GET /internal/v1/faults with the cluster key.
func getFaults(t *testing.T, s *runningServe, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+s.addr+faultsPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(clusterKeyHeader, key)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", faultsPath, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
