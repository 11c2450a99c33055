package cluster_test

// A full disk, black-box (docs/operations.md#a-full-disk): real `carmy serve` processes whose
// data dirs are small tmpfs mounts, filled with a file until the file
// system answers ENOSPC while calls are made, then emptied again. The
// calls go to an HTTP tool (procUpstream) that counts how often each
// request_id ran.

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// diskFullWritesAgain is the target (docs/operations.md#a-full-disk) for writes to resume once
// there is room; the test asserts a generous multiple of it and logs what
// it measured.
const (
	diskFullWritesAgain = 5 * time.Second
	diskFullDeadline    = 15 * time.Second
	// diskFullHold is how long a cluster node's disk stays full once it
	// reports it.
	diskFullHold = 3 * time.Second
)

// mountTmpfs mounts a tmpfs of size on a new directory, unmounted when the
// test ends (after the processes using it are killed: their cleanups are
// registered later, so run first). Without root or a working mount the
// test is skipped, loudly, or fails when CARMY_REQUIRE_TMPFS=1 (CI).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	why := ""
	if os.Geteuid() != 0 {
		why = "not root"
	} else if out, err := osexec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		why = fmt.Sprintf("mount -t tmpfs: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if why != "" {
		if os.Getenv("CARMY_REQUIRE_TMPFS") == "1" {
			t.Fatalf("CARMY_REQUIRE_TMPFS=1 but a tmpfs cannot be mounted (%s)", why)
		}
		testutil.SkipLoudly(t, "SKIPPED: THE FULL-DISK TEST DID NOT RUN: it needs root to mount a small tmpfs (%s); CI sets CARMY_REQUIRE_TMPFS=1 to fail instead", why)
	}
	t.Cleanup(func() {
		if out, err := osexec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a file in dir until the file system has no room left,
// and returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fill")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for chunk := 1 << 20; chunk >= 512; chunk /= 4 {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling %s: %v", dir, err)
				}
				break
			}
		}
	}
	return path
}

// diskNode is a process whose data dir is a tmpfs of its own.
type diskNode struct {
	*testutil.Node
	mount string
}

// startDiskCluster starts size nodes n1…nN, each with its data dir on a
// tmpfs of its own and the tool "upstream" calling up, and waits until
// they form one cluster, all ready.
func startDiskCluster(t *testing.T, bin string, size int, up *procUpstream) []*diskNode {
	t.Helper()
	config := procWriteConfig(t, up.URL)
	var nodes []*diskNode
	for i := 1; i <= size; i++ {
		mount := mountTmpfs(t, "32m")
		id := fmt.Sprintf("n%d", i)
		args := []string{"--dev", "--fast-failover", "--node-id", id, "--data-dir", filepath.Join(mount, "data"), "--cluster-key", testutil.ClusterKey,
			"--config", config}
		if i == 1 {
			args = append(args, "--bootstrap")
		} else {
			args = append(args, "--join", nodes[0].Addr)
		}
		nodes = append(nodes, &diskNode{Node: testutil.StartCarmy(t, bin, testutil.StartOptions{}, args...), mount: mount})
	}
	testutil.WaitFor(t, procWait, "the cluster to form", func() error {
		for _, n := range nodes {
			if err := n.Ready(); err != nil {
				return fmt.Errorf("%s: %w", n.ID(), err)
			}
			st, err := n.ClusterStatus(t.Context())
			if err != nil {
				return err
			}
			if len(st.Voters()) != size || st.LeaderID() == "" {
				return fmt.Errorf("%s: voters %v, leader %q", n.ID(), st.Voters(), st.LeaderID())
			}
		}
		return nil
	})
	return nodes
}

// leaderOf returns the node n names as leader.
func leaderOf(t *testing.T, nodes []*diskNode, n *diskNode) *diskNode {
	t.Helper()
	st, err := n.ClusterStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range nodes {
		if m.ID() == st.LeaderID() {
			return m
		}
	}
	t.Fatalf("%s names no running leader (%q)", n.ID(), st.LeaderID())
	return nil
}

// diskCall is one call of the upstream tool with a few KB of arguments
// (so that each takes new pages in the log's file), under request id id.
func diskCall(id string) string {
	return fmt.Sprintf(`{"tool":"upstream","request_id":%q,"arguments":{"id":%q,"pad":%q}}`, id, id, strings.Repeat("x", 6000))
}

// tally counts the answers to calls made during a fault, by kind, with
// the first answer of each kind, for the test's log.
type tally map[string]int

func (tl tally) add(t *testing.T, a procAnswer) {
	kind := "200"
	switch {
	case refusedForDisk(a):
		kind = "503 disk full"
	case a.status != http.StatusOK:
		kind = fmt.Sprintf("%d other", a.status)
	}
	if tl[kind] == 0 && kind != "200" {
		t.Logf("first %q answer: %s", kind, a)
	}
	tl[kind]++
}

// acked is a call answered 200, to replay later.
type acked struct {
	id, execID string
}

// diskFullCall makes a call on n while a disk is (or is about to be)
// full. The answer must be 200 (recorded: then it is returned) or 503
// UNAVAILABLE in the envelope, refused before its tool ran ("tool_ran":
// false) within diskFullAnswerWithin: never "the tool ran but its
// outcome is not recorded", and never held for the write's deadline,
// the call whose reservation met the full disk included. A refused call
// is noted in refused, to retry once there is room (settleRefused).
func diskFullCall(t *testing.T, n *diskNode, id string, refused *[]refusedCall) (procAnswer, *acked) {
	t.Helper()
	start := time.Now()
	a := procCall(t, n.Node, diskCall(id))
	took := time.Since(start)
	switch {
	case a.status == http.StatusOK && a.str("status") == "completed":
		return a, &acked{id: id, execID: a.str("execution_id")}
	case a.status == http.StatusServiceUnavailable && a.str("error", "code") == "UNAVAILABLE":
		if msg := a.str("error", "message"); strings.Contains(msg, "tool ran") || strings.Contains(msg, "not recorded") {
			t.Fatalf("call %s on %s while a disk is full: %s: the tool ran but was not recorded", id, n.ID(), a)
		}
		if took > diskFullAnswerWithin {
			t.Fatalf("call %s on %s while a disk is full: answered %s after %s, want within %s", id, n.ID(), a, took.Round(time.Millisecond), diskFullAnswerWithin)
		}
		if a.get("error", "tool_ran") != false {
			t.Fatalf("call %s on %s while a disk is full: %s, want \"tool_ran\": false", id, n.ID(), a)
		}
		*refused = append(*refused, refusedCall{id: id, node: n, took: took})
		return a, nil
	}
	t.Fatalf("call %s on %s while its disk is full: %s, want 200 completed or 503 UNAVAILABLE", id, n.ID(), a)
	return a, nil
}

// refusedCall is a call answered 503 during the fault, on node.
type refusedCall struct {
	id   string
	node *diskNode
	took time.Duration
}

// settleRefused retries every refused call on its node once there is
// room, until it runs: the identity of a call answered 503 "tool_ran":
// false is not left running or uncertain (a reservation of it that
// committed after all is released by the node that made it), and its
// retry is a first run, not a replay, since the tool did not run for the
// refused call. The retries are returned, to replay later.
func settleRefused(t *testing.T, refused []refusedCall) []acked {
	t.Helper()
	var slowest time.Duration
	var out []acked
	for _, r := range refused {
		slowest = max(slowest, r.took)
		var a procAnswer
		testutil.WaitFor(t, diskFullDeadline, "a retry of "+r.id+" on "+r.node.ID()+" to run", func() error {
			a = procCall(t, r.node.Node, diskCall(r.id))
			switch {
			case a.status == http.StatusOK:
				return nil
			case a.uncertain("running"), a.status == http.StatusServiceUnavailable:
				return fmt.Errorf("%s", a)
			}
			t.Fatalf("a retry of %s, refused while the disk was full: %s, want it to run once its reservation is released", r.id, a)
			return nil
		})
		out = append(out, acked{id: r.id, execID: procWantRun(t, "a retry of "+r.id+", refused while the disk was full", a, "completed")})
	}
	t.Logf("MEASURED: %d calls answered 503 during the fault, the slowest after %s (bound %s); each ran once on its retry", len(refused), slowest.Round(time.Millisecond), diskFullAnswerWithin)
	return out
}

// ranOnce checks that the upstream tool ran exactly once for each of
// calls, and at most once for every request_id it saw.
func ranOnce(t *testing.T, up *procUpstream, calls []acked) {
	t.Helper()
	up.mu.Lock()
	defer up.mu.Unlock()
	for id, n := range up.byReq {
		if n > 1 {
			t.Errorf("the tool ran %d times for request_id %s", n, id)
		}
	}
	for _, c := range calls {
		if up.byReq[c.id] != 1 || up.execOf[c.id] != c.execID {
			t.Errorf("request_id %s: the tool ran %d times, first for %s; want once, for %s", c.id, up.byReq[c.id], up.execOf[c.id], c.execID)
		}
	}
}

// refusedForDisk reports whether a is the 503 of a node refusing a call
// up front, before reserving it, because its log's disk is full.
func refusedForDisk(a procAnswer) bool {
	msg := a.str("error", "message")
	return a.status == http.StatusServiceUnavailable && a.str("error", "code") == "UNAVAILABLE" &&
		strings.Contains(msg, "disk") && strings.Contains(msg, "full") && strings.Contains(msg, "not reserved") && strings.Contains(msg, "did not run")
}

// metricValue reads one unlabelled sample from n's GET /metrics.
func metricValue(t *testing.T, n *diskNode, name string) string {
	t.Helper()
	resp, err := procClient.Get(n.URL + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics on %s: %v", n.ID(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics on %s: %s", n.ID(), resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}

// stillServes checks what a node with a full disk must keep answering:
// it runs, /healthz and /metrics answer, and calls recorded before replay.
func stillServes(t *testing.T, n *diskNode, before []acked) {
	t.Helper()
	if !n.Running() {
		t.Fatalf("%s exited on a full disk: %v", n.ID(), n.ExitErr())
	}
	if a := procDo(t, http.MethodGet, n.URL+"/healthz", ""); a.status != http.StatusOK {
		t.Fatalf("GET /healthz on %s with a full disk: %s", n.ID(), a)
	}
	if v := metricValue(t, n, "carmy_raft_log_disk_full"); v != "1" {
		t.Fatalf("carmy_raft_log_disk_full on %s with a full disk = %q, want 1", n.ID(), v)
	}
	for _, c := range before {
		procWantReplay(t, "a replay on "+n.ID()+" while its disk is full", procCall(t, n.Node, diskCall(c.id)), c.execID)
	}
}

// replayAll checks that every acknowledged call replays on n.
func replayAll(t *testing.T, n *diskNode, calls []acked) {
	t.Helper()
	for _, c := range calls {
		procWantReplay(t, "a replay on "+n.ID()+" after the fault", procCall(t, n.Node, diskCall(c.id)), c.execID)
	}
}

// TestProcessDiskFull: the full disk of docs/operations.md#a-full-disk on the leader of a single
// node, then on the leader and on a follower of a 3-node cluster. The node
// stays up; it answers new calls 503 UNAVAILABLE before running them (a
// lone leader), or forwards them to a leader that can write (a follower,
// or a leader that handed over); every 503, the call whose reservation met
// the full disk included, comes within diskFullAnswerWithin and says
// "tool_ran": false; it answers /healthz, /metrics and replays throughout;
// it takes writes again within diskFullDeadline of the fill file's removal
// (the target is diskFullWritesAgain: the measure is logged); every call
// refused meanwhile runs on its retry (its identity not left running),
// every call answered 200 replays, and the tool ran once per request_id.
func TestProcessDiskFull(t *testing.T) {
	procSkipShort(t)
	testutil.LongTier(t, "full disks under a cluster of processes")
	mountTmpfs(t, "1m") // skip (or fail) at once where tmpfs cannot be had
	bin := testutil.BuildCarmy(t)
	t.Run("single node", func(t *testing.T) {
		up := procStartUpstream(t)
		n := startDiskCluster(t, bin, 1, up)[0]
		diskFullLoneLeader(t, n, up)
	})
	t.Run("three nodes", func(t *testing.T) {
		up := procStartUpstream(t)
		nodes := startDiskCluster(t, bin, 3, up)
		procStep(t, "leader", func(t *testing.T) { diskFullClusterNode(t, nodes, true, up) })
		procStep(t, "follower", func(t *testing.T) { diskFullClusterNode(t, nodes, false, up) })
	})
}

// diskFullLoneLeader fills the disk of a single node.
func diskFullLoneLeader(t *testing.T, n *diskNode, up *procUpstream) {
	var refused []refusedCall
	a, ok := diskFullCall(t, n, "lone-before", &refused)
	if ok == nil {
		t.Fatalf("a call before the fill: %s", a)
	}
	calls := []acked{*ok}
	fill := fillDisk(t, n.mount)
	doorRefused := false
	answers := tally{}
	defer func() { t.Logf("answers during the fault: %v", answers) }()
	for i := 0; i < 200 && !doorRefused; i++ {
		a, ok := diskFullCall(t, n, fmt.Sprintf("lone-during-%d", i), &refused)
		answers.add(t, a)
		if ok != nil {
			calls = append(calls, *ok)
		}
		doorRefused = refusedForDisk(a)
	}
	if !doorRefused {
		t.Fatal("200 calls on a full disk, none refused for it")
	}
	stillServes(t, n, calls)
	if a, _ := diskFullCall(t, n, "lone-refused", &refused); !refusedForDisk(a) {
		t.Fatalf("a new call once the node refuses calls: %s, want 503 for the full disk", a)
	} else {
		t.Logf("a new call on a full disk: %s", a)
	}

	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	room := time.Now()
	var took time.Duration
	for i := 0; ; i++ {
		a, ok := diskFullCall(t, n, fmt.Sprintf("lone-after-%d", i), &refused)
		if ok != nil {
			calls = append(calls, *ok)
			took = time.Since(room)
			break
		}
		if time.Since(room) > diskFullDeadline {
			t.Fatalf("no call succeeded within %s of room coming back; the last: %s", diskFullDeadline, a)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("MEASURED: single node: first write %s after the fill file's removal (target %s)", took.Round(time.Millisecond), diskFullWritesAgain)
	calls = append(calls, settleRefused(t, refused)...)
	replayAll(t, n, calls)
	ranOnce(t, up, calls)
}

// diskFullClusterNode fills the disk of the leader (or of a follower) of
// a 3-node cluster; calls go to that node, which either refuses them
// (503, before running them) or has them written by a leader that can,
// and, when the leader is filled, every other one to a follower, which
// forwards it to the full leader until the leader hands over.
func diskFullClusterNode(t *testing.T, nodes []*diskNode, fillLeader bool, up *procUpstream) {
	leader := leaderOf(t, nodes, nodes[0])
	full, via := leader, leader
	for _, n := range nodes {
		if n != leader {
			via = n
			break
		}
	}
	if !fillLeader {
		full = via // every call goes to the follower filled
	}
	tag := map[bool]string{true: "leader", false: "follower"}[fillLeader]
	// Every node holds what the leader applied, so that the one filled
	// takes appends while its disk fills.
	testutil.WaitFor(t, procWait, "every node to catch up with the leader", func() error { return caughtUp(t, nodes, leader) })
	var refused []refusedCall
	a, ok := diskFullCall(t, full, tag+"-before", &refused)
	if ok == nil {
		t.Fatalf("a call before the fill: %s", a)
	}
	calls := []acked{*ok}
	fill := fillDisk(t, full.mount)
	// Calls until the node sees its disk full (its gauge), then more for
	// diskFullHold: the others' retries to it back off meanwhile, as in a
	// real fault.
	seen := -1
	var seenAt time.Time
	answers := tally{}
	defer func() { t.Logf("answers during the fault: %v", answers) }()
	for i := 0; i < 300 && (seen < 0 || time.Since(seenAt) < diskFullHold); i++ {
		to := full
		if i%2 == 1 {
			to = via
		}
		a, ok := diskFullCall(t, to, fmt.Sprintf("%s-during-%d", tag, i), &refused)
		answers.add(t, a)
		if ok != nil {
			calls = append(calls, *ok)
		}
		if seen < 0 && metricValue(t, full, "carmy_raft_log_disk_full") == "1" {
			seen, seenAt = i, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	if seen < 0 {
		t.Fatalf("300 calls on %s's full disk, and it never reported it", full.ID())
	}
	stillServes(t, full, calls)
	if fillLeader {
		testutil.WaitFor(t, procWait, "another node to lead", func() error {
			if l := leaderOf(t, nodes, full); l == full {
				return errors.New("the node with the full disk still leads")
			}
			return nil
		})
	}
	// The others take writes meanwhile, and so does the full node, by
	// forwarding them (or it refuses them, before running them).
	for _, n := range nodes {
		if n == full {
			continue
		}
		a := procCall(t, n.Node, diskCall(tag+"-elsewhere-"+n.ID()))
		calls = append(calls, acked{id: tag + "-elsewhere-" + n.ID(), execID: procWantRun(t, "a call on "+n.ID(), a, "completed")})
	}

	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	room := time.Now()
	var writes, caughtUp time.Duration
	for i := 0; writes == 0 || caughtUp == 0; i++ {
		if writes == 0 {
			if _, ok := diskFullCall(t, full, fmt.Sprintf("%s-after-%d", tag, i), &refused); ok != nil {
				calls = append(calls, *ok)
				writes = time.Since(room)
			}
		}
		if caughtUp == 0 && metricValue(t, full, "carmy_raft_log_disk_full") == "0" && full.Ready() == nil &&
			caughtUpWith(t, full, leaderOf(t, nodes, nodes[0])) == nil {
			caughtUp = time.Since(room)
		}
		if time.Since(room) > diskFullDeadline {
			t.Fatalf("%s: within %s of room coming back: writes after %s, log written, caught up and ready after %s (0: not yet)", full.ID(), diskFullDeadline, writes, caughtUp)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("MEASURED: 3 nodes, %s %s filled: first write through it %s after the fill file's removal (target %s); its log written again, caught up with the leader and ready after %s",
		tag, full.ID(), writes.Round(time.Millisecond), diskFullWritesAgain, caughtUp.Round(time.Millisecond))
	calls = append(calls, settleRefused(t, refused)...)
	for _, n := range nodes {
		replayAll(t, n, calls)
	}
	ranOnce(t, up, calls)
}

// caughtUp returns nil once every node has applied what leader has.
func caughtUp(t *testing.T, nodes []*diskNode, leader *diskNode) error {
	for _, n := range nodes {
		if err := caughtUpWith(t, n, leader); err != nil {
			return err
		}
	}
	return nil
}

// caughtUpWith returns nil once n has applied up to leader's commit index
// (read first).
func caughtUpWith(t *testing.T, n, leader *diskNode) error {
	commit, err := strconv.ParseFloat(metricValue(t, leader, "carmy_raft_commit_index"), 64)
	if err != nil {
		return fmt.Errorf("%s's commit index: %w", leader.ID(), err)
	}
	applied, err := strconv.ParseFloat(metricValue(t, n, "carmy_raft_applied_index"), 64)
	if err != nil {
		return fmt.Errorf("%s's applied index: %w", n.ID(), err)
	}
	if applied < commit {
		return fmt.Errorf("%s applied %v of the %v entries %s committed", n.ID(), applied, commit, leader.ID())
	}
	return nil
}
