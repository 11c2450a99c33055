package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster/raftlog"
	"github.com/carmyhq/carmy/tests/testutil"
)

// startLoneNode starts a single node with its data dir dataDir, the tool
// "upstream" calling up, and extra flags, and waits until it is ready.
func startLoneNode(t *testing.T, bin, dataDir string, up *procUpstream, extra ...string) *testutil.Node {
	t.Helper()
	args := append([]string{"--dev", "--fast-failover", "--node-id", "n1", "--bootstrap", "--data-dir", dataDir,
		"--cluster-key", testutil.ClusterKey, "--config", procWriteConfig(t, up.URL)}, extra...)
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{}, args...)
	n.WaitReady(t, procWait)
	return n
}

// replayCompleted checks that every call of results answered completed
// replays on n with its execution.
func replayCompleted(t *testing.T, n *testutil.Node, results []procResult) int {
	t.Helper()
	count := 0
	for _, r := range results {
		if !r.completed() {
			continue
		}
		count++
		procWantReplay(t, "a replay of "+r.requestID+" after the restart", procCall(t, n, r.body), r.answer.str("execution_id"))
	}
	return count
}

// A lone node (no other copy to recover from) killed with SIGKILL while
// clients call it keeps every call it acknowledged: each replays after the
// restart. Its log is the WAL, and a torn record at the end of its last
// segment (what a crash during a write leaves) is cut off at the restart.
func TestProcessWALKill9KeepsAcknowledged(t *testing.T) {
	procSkipShort(t)
	bin := testutil.BuildCarmy(t)
	up := procStartUpstream(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	n := startLoneNode(t, bin, dataDir, up)

	l := procStartLoad([]*testutil.Node{n}, 8)
	testutil.WaitFor(t, procWait, "100 calls completed", func() error {
		if c := l.completedSince(time.Time{}); c < 100 {
			return fmt.Errorf("%d completed", c)
		}
		return nil
	})
	n.Kill()
	l.halt()

	segs, err := filepath.Glob(filepath.Join(dataDir, raftlog.WALDir, "*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no WAL segment in %s (%v): the node did not log to the WAL", dataDir, err)
	}
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The header of a 200-byte record, and 5 of its bytes.
	if _, err := f.Write([]byte{200, 0, 0, 0, 9, 9, 9, 9, 1, 2, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	f.Close()

	n = n.Restart(t)
	n.WaitReady(t, procWait)
	count := replayCompleted(t, n, l.results)
	t.Logf("%d calls acknowledged before the kill, all replayed after the restart", count)
	procWantRun(t, "a new call after the restart", procCall(t, n, `{"tool":"upstream","arguments":{"after":1},"request_id":"after-restart"}`), "completed")
}

// A node whose log is in raft.db (--raft-log bolt, as before the WAL)
// keeps every record when it restarts on the WAL: its log is moved into
// raft-log/, and the bolt log store is refused from then on.
func TestProcessRaftLogMigratesFromBolt(t *testing.T) {
	procSkipShort(t)
	bin := testutil.BuildCarmy(t)
	up := procStartUpstream(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	n := startLoneNode(t, bin, dataDir, up, "--raft-log", "bolt")
	var results []procResult
	for i := range 20 {
		body := fmt.Sprintf(`{"tool":"upstream","arguments":{"seq":%d},"request_id":"bolt-%d"}`, i, i)
		a := procCall(t, n, body)
		procWantRun(t, "a call on the bolt log", a, "completed")
		results = append(results, procResult{requestID: fmt.Sprintf("bolt-%d", i), body: body, answer: a})
	}
	if _, err := os.Stat(filepath.Join(dataDir, raftlog.WALDir)); err == nil {
		t.Fatal("a node with --raft-log bolt made a WAL")
	}
	if err := n.Stop(procWait); err != nil {
		t.Fatal(err)
	}

	n = n.Restart(t, testutil.WithoutFlag(n.Args(), "--raft-log")...)
	n.WaitReady(t, procWait)
	if _, err := os.Stat(filepath.Join(dataDir, raftlog.WALDir)); err != nil {
		t.Fatalf("no WAL after a restart on the default log store: %v", err)
	}
	replayCompleted(t, n, results)
	procWantRun(t, "a new call on the WAL", procCall(t, n, `{"tool":"upstream","arguments":{"after":1},"request_id":"wal-1"}`), "completed")
	if err := n.Stop(procWait); err != nil {
		t.Fatal(err)
	}

	// Back to bolt: refused, naming the flag.
	if _, err := n.Relaunch(t, append(testutil.WithoutFlag(n.Args(), "--raft-log"), "--raft-log", "bolt")...); err == nil {
		t.Fatal("a node whose log is in the WAL started with --raft-log bolt")
	}
}
