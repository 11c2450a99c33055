package main_test

// Black-box test of the MCP gateway on a cluster (issue 15): three carmy
// processes in front of one MCP server over HTTP (in this test process)
// and each with its own stdio MCP server child, all counting executions.

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestBlackBoxMCPGatewayThreeNodes: one identity called through every node
// of a cluster at once, then retried on each, runs once on the upstream
// (HTTP and stdio alike); a runner killed with -9 while the upstream tool
// runs leaves the identity EXECUTION_UNCERTAIN on the other nodes, and the
// tool never runs again.
func TestBlackBoxMCPGatewayThreeNodes(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds the carmy binary and runs a cluster of three processes")
	}
	bin := testutil.BuildCarmy(t)
	stdioBin := filepath.Join(t.TempDir(), "stdioserver")
	build := exec.Command("go", "build", "-o", stdioBin, "./mcpgateway/testdata/stdioserver")
	build.Dir = testutil.ModuleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build stdioserver: %v\n%s", err, out)
	}
	countFile := filepath.Join(t.TempDir(), "count") // every node's child appends to it
	remote := newGWUpstream(t)
	config := fmt.Sprintf(`mcp_servers:
  - name: remote
    url: %s/mcp
  - name: local
    command: [%q, "-count", %q]
    tools: [create, block]
`, remote.URL, stdioBin, countFile)
	path := filepath.Join(t.TempDir(), "carmy.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	c := testutil.StartCluster(t, bin, 3, testutil.StartOptions{}, "--config", path, "--fast-failover")
	leader := c.Leader(t, 30*time.Second)
	nodes := append([]*testutil.Node{leader}, c.Followers(leader)...)
	for _, n := range nodes {
		gwWaitTools(t, n.URL, "remote.create", "remote.block", "local.create", "local.block")
	}
	localRuns := func(line string) int {
		return len(slices.DeleteFunc(lineSet(t, countFile), func(l string) bool { return l != line }))
	}

	// The same identity through the three nodes at once, then again on
	// each: one run, everything else a replay or, while it ran, uncertain.
	for _, tool := range []string{"remote.create", "local.create"} {
		body := fmt.Sprintf(`{"tool":%q,"arguments":{"sku":"A"},"request_id":"r3-%s"}`, tool, tool)
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() {
				status, a := apiJSON(t, http.MethodPost, n.URL+"/v1/tools/call", "", body)
				e, _ := a["error"].(map[string]any)
				code, _ := e["code"].(string)
				if status != http.StatusOK && !(status == http.StatusConflict && code == "EXECUTION_UNCERTAIN") {
					t.Errorf("%s on %s: %d %v", tool, n.ID(), status, a)
				}
			})
		}
		wg.Wait()
		var exec string
		testutil.WaitFor(t, 30*time.Second, "every node to replay "+tool, func() error {
			for _, n := range nodes {
				status, a := apiJSON(t, http.MethodPost, n.URL+"/v1/tools/call", "", body)
				if status != http.StatusOK || a["replayed"] != true || a["status"] != "completed" {
					return fmt.Errorf("%s on %s: %d %v", tool, n.ID(), status, a)
				}
				if id, _ := a["execution_id"].(string); exec == "" {
					exec = id
				} else if id != exec {
					return fmt.Errorf("%s on %s: execution %s, another node answered %s", tool, n.ID(), id, exec)
				}
			}
			return nil
		})
	}
	if r := remote.runsOf("create r3-remote.create"); r != 1 {
		t.Errorf("the HTTP upstream ran create %d times", r)
	}
	if r := localRuns("create r3-local.create"); r != 1 {
		t.Errorf("the stdio upstreams ran create %d times: %q", r, lineSet(t, countFile))
	}

	// A follower runs the blocking tools and is killed with -9: the other
	// nodes answer EXECUTION_UNCERTAIN (running, then interrupted once the
	// cluster sees the node dead), and nothing runs a second time.
	victim, others := nodes[1], []*testutil.Node{nodes[0], nodes[2]}
	var wg sync.WaitGroup
	for _, tool := range []string{"remote.block", "local.block"} {
		wg.Go(func() {
			// No answer comes: the node is killed meanwhile.
			gwCallNoCheck(victim.URL, fmt.Sprintf(`{"tool":%q,"request_id":"k3-%s"}`, tool, tool))
		})
	}
	testutil.WaitFor(t, 30*time.Second, "both blocking tools started on "+victim.ID(), func() error {
		if remote.runsOf("block k3-remote.block") != 1 || localRuns("block k3-local.block") != 1 {
			return fmt.Errorf("remote %d, local %q", remote.runsOf("block k3-remote.block"), lineSet(t, countFile))
		}
		return nil
	})
	victim.Kill()
	wg.Wait()
	for _, tool := range []string{"remote.block", "local.block"} {
		body := fmt.Sprintf(`{"tool":%q,"request_id":"k3-%s"}`, tool, tool)
		testutil.WaitFor(t, 60*time.Second, tool+" interrupted on the survivors", func() error {
			for _, n := range others {
				status, a := apiJSON(t, http.MethodPost, n.URL+"/v1/tools/call", "", body)
				e, _ := a["error"].(map[string]any)
				if status != http.StatusConflict || e["code"] != "EXECUTION_UNCERTAIN" {
					t.Fatalf("the retry of %s on %s after kill -9: %d %v", tool, n.ID(), status, a)
				}
				if e["status"] != "interrupted" {
					return fmt.Errorf("%s on %s: %v", tool, n.ID(), e["status"])
				}
			}
			return nil
		})
	}
	if r := remote.runsOf("block k3-remote.block"); r != 1 {
		t.Errorf("remote.block ran %d times", r)
	}
	if r := localRuns("block k3-local.block"); r != 1 {
		t.Errorf("local.block ran %d times: %q", r, lineSet(t, countFile))
	}
}
