package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// nodeRecord calls create_order with requestID through n when call is
// set, then returns the node_id of that identity's record and the
// cluster's leader as n sees them.
func nodeRecord(t *testing.T, n *testutil.Node, requestID string, call bool) (recordNode, leader string) {
	t.Helper()
	n.WaitReady(t, 30*time.Second)
	if call {
		body := fmt.Sprintf(`{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":%q}`, requestID)
		resp, err := http.Post(n.URL+"/v1/tools/call", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the call through %s: %s", n.URL, resp.Status)
		}
	}
	var rec struct {
		NodeID string `json:"node_id"`
	}
	getJSON(t, n.URL+"/v1/executions?request_id="+requestID, &rec)
	st, err := testutil.FetchClusterStatus(t.Context(), n.URL)
	if err != nil {
		t.Fatal(err)
	}
	return rec.NodeID, st.LeaderID()
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// A node started without --node-id (`carmy serve --dev` and nothing else)
// is not node1: it generates an id, node-<8 hex digits>, keeps it in
// carmy-data/default/node-id and is that node again after a restart, with
// its records. A data dir an earlier version left at carmy-data/node1
// (Raft state, no node-id file) is still found, as node1's.
func TestNodeIDGeneratedAndKeptAcrossRestarts(t *testing.T) {
	t.Parallel()
	bin := testutil.BuildCarmy(t)
	t.Run("generated", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		n := testutil.StartCarmy(t, bin, testutil.StartOptions{Dir: dir}, "--dev")
		idFile := filepath.Join(dir, "carmy-data", "default", "node-id")
		b, err := os.ReadFile(idFile)
		if err != nil {
			t.Fatalf("no node id kept in the default data dir: %v", err)
		}
		id := strings.TrimSpace(string(b))
		if !regexp.MustCompile(`^node-[0-9a-f]{8}$`).MatchString(id) {
			t.Fatalf("the generated node id is %q, want node-<8 hex digits>", id)
		}
		if rec, leader := nodeRecord(t, n, "before-restart", true); rec != id || leader != id {
			t.Fatalf("record of node %q, leader %q; want both %s", rec, leader, id)
		}
		if err := n.Stop(20 * time.Second); err != nil {
			t.Fatalf("stop: %v", err)
		}
		n = n.Restart(t)
		if rec, leader := nodeRecord(t, n, "before-restart", false); rec != id || leader != id {
			t.Fatalf("after a restart: the record of node %q, leader %q; want both %s (the record kept)", rec, leader, id)
		}
		if b, _ := os.ReadFile(idFile); strings.TrimSpace(string(b)) != id {
			t.Errorf("the node id file holds %q after a restart, want %s", b, id)
		}
	})
	t.Run("earlier version's node1", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		// As an earlier version left it: node1's state in carmy-data/node1,
		// no node-id file.
		n := testutil.StartCarmy(t, bin, testutil.StartOptions{Dir: dir}, "--dev", "--node-id", "node1")
		if rec, _ := nodeRecord(t, n, "legacy", true); rec != "node1" {
			t.Fatalf("record of node %q, want node1", rec)
		}
		if err := n.Stop(20 * time.Second); err != nil {
			t.Fatalf("stop: %v", err)
		}
		n = n.Restart(t, "--dev")
		if rec, leader := nodeRecord(t, n, "legacy", false); rec != "node1" || leader != "node1" {
			t.Fatalf("restarted without --node-id: record of node %q, leader %q; want node1's data found again", rec, leader)
		}
		if _, err := os.Stat(filepath.Join(dir, "carmy-data", "default")); err == nil {
			t.Error("carmy-data/default was made beside the earlier version's carmy-data/node1")
		}
	})
}

// A node started with the id of a live member and --join is refused by
// the cluster and exits non-zero, its log saying why at ERROR; the
// member and its cluster carry on.
func TestJoinWithATakenNodeIDExits(t *testing.T) {
	t.Parallel()
	bin := testutil.BuildCarmy(t)
	dir := t.TempDir()
	first := testutil.StartCarmy(t, bin, testutil.StartOptions{Dir: dir}, "--dev", "--node-id", "solo")
	first.WaitReady(t, 30*time.Second)
	key := filepath.Join(dir, "carmy-data", "solo", "cluster-key")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	twin := exec.CommandContext(ctx, bin, "serve", "--dev", "--node-id", "solo", "--join", first.Addr, "--cluster-key-file", key,
		"--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0")
	out, err := twin.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the node with a taken id still runs after 30 s:\n%s", out)
	}
	if err == nil {
		t.Errorf("the node with a taken id exited 0, want non-zero")
	}
	for _, want := range []string{"level=ERROR", `node id \"solo\" belongs to a live member`, first.RaftAddr()} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refused node's log does not say %q:\n%s", want, out)
		}
	}
	if !strings.Contains(first.Logs(), "level=WARN msg=\"refused a join") {
		t.Errorf("the leader did not warn of the refused join:\n%s", first.Logs())
	}
	if rec, leader := nodeRecord(t, first, "after-twin", true); rec != "solo" || leader != "solo" {
		t.Fatalf("after the refusal: record of node %q, leader %q; want solo", rec, leader)
	}
}
