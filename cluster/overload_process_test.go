package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/testutil"
)

// TestProcessBurstOnBusyHost is SPEC §7's overload: bursts of concurrent
// calls with large results on one follower of a 3-node cluster, while
// three processes spin on the CPU beside the nodes (on a 2-core host the
// nodes get well under half of it). Every call is answered 200 or refused
// 503 before anything was reserved (the refusal names the bound that
// refused it, and says the tool did not run); none is answered "the tool
// ran but its outcome is not recorded", no election is held (every node's
// term is the same after as before, and no node's log tells of a
// candidate), and every 200 replays through the leader with its
// execution.
//
// Each scenario runs once; CARMY_BURST_RUNS=N runs it N times
// (docs/testing.md).
func TestProcessBurstOnBusyHost(t *testing.T) {
	procSkipShort(t)
	bin := testutil.BuildCarmy(t)
	runs := testutil.Runs(t, "CARMY_BURST_RUNS")
	for _, sc := range []struct{ calls, size int }{{160, 900 << 10}, {400, 300 << 10}} {
		for run := range runs {
			t.Run(fmt.Sprintf("%dx%dKiB/run%d", sc.calls, sc.size>>10, run+1), func(t *testing.T) {
				burstOnBusyHost(t, bin, sc.calls, sc.size)
			})
		}
	}
}

// busyProcs is how many processes spin beside the nodes; burstRetryFor is
// how long a burst's refused calls are retried.
const (
	busyProcs     = 3
	burstRetryFor = 40 * time.Second
)

func burstOnBusyHost(t *testing.T, bin string, calls, size int) {
	c := testutil.StartCluster(t, bin, 3, testutil.StartOptions{}, "--dev")
	leader := c.Leader(t, procWait)
	follower := c.Followers(leader)[0]
	terms := procTerms(t, c.Nodes())
	logsAt := procLogLengths(c.Nodes())
	testutil.BusyHost(t, busyProcs, 3*time.Minute)

	client := &http.Client{Timeout: 90 * time.Second}
	body := func(i int) string {
		return fmt.Sprintf(`{"tool":"echo","request_id":"busy-%d","arguments":{"i":%d,"s":%q}}`, i, i, strings.Repeat(string(rune('a'+i%26)), size))
	}
	type result struct {
		answer  procAnswer
		err     error
		refused int // 503 refusals before reserving
	}
	results := make([]result, calls)
	// Refused calls are retried (after Retry-After) for this long; one
	// still refused then was answered as SPEC §7 allows.
	deadline := time.Now().Add(burstRetryFor)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			<-start
			r := &results[i]
			for {
				r.answer, r.err = procSend(client, http.MethodPost, follower.URL+"/v1/tools/call", body(i))
				if r.err != nil || !procRefusedUnreserved(r.answer) || time.Now().After(deadline) {
					return
				}
				r.refused++
				wait, _ := strconv.Atoi(r.answer.header.Get("Retry-After"))
				time.Sleep(time.Duration(max(wait, 1)) * time.Second)
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)

	refused, failed, completed := 0, 0, 0
	for i, r := range results {
		refused += r.refused
		a := r.answer
		if r.err == nil && a.status == http.StatusOK && a.str("status") == "completed" && a.get("data", "i") == float64(i) &&
			len(a.str("data", "s")) == size {
			completed++
			continue
		}
		if r.err == nil && procRefusedUnreserved(a) {
			continue
		}
		if failed++; failed <= 5 {
			t.Errorf("call %d: %v %.400s", i, r.err, a)
		}
	}
	t.Logf("%d calls of %d KiB on %s beside %d busy processes: settled in %s; %d completed, %d refusals before reserving (retried), %d failed; load average %s",
		calls, size>>10, follower.ID(), busyProcs, took.Round(time.Millisecond), completed, refused, failed, procLoadAvg())
	procNoElection(t, c.Nodes(), terms, logsAt)
	if failed > 0 {
		t.Fatalf("%d of %d calls were answered neither completed nor refused before reserving", failed, calls)
	}
	if completed == 0 {
		t.Fatal("no call completed")
	}
	for i := range calls {
		if results[i].answer.status != http.StatusOK {
			continue
		}
		a, err := procSend(client, http.MethodPost, leader.URL+"/v1/tools/call", body(i))
		if err != nil {
			t.Fatalf("replay %d: %v", i, err)
		}
		procWantReplay(t, fmt.Sprint("replay ", i), a, results[i].answer.str("execution_id"))
	}
}

// procRefusedUnreserved reports whether a is a 503 refusal made before
// anything was reserved: the node's bound on tools running or on bytes in
// flight (SPEC §7), whose envelope names the resource and says the tool
// did not run.
func procRefusedUnreserved(a procAnswer) bool {
	res := a.str("error", "resource")
	return a.status == http.StatusServiceUnavailable && a.str("error", "code") == "UNAVAILABLE" &&
		(res == "running" || res == "inflight_bytes") && a.get("error", "tool_ran") == false &&
		a.header.Get("Retry-After") != ""
}

// procTerms reads every node's Raft term (carmy_raft_term).
func procTerms(t *testing.T, nodes []*testutil.Node) map[string]float64 {
	t.Helper()
	terms := make(map[string]float64)
	for _, n := range nodes {
		v, err := procMetric(n, "carmy_raft_term")
		if err != nil {
			t.Fatalf("%s: %v", n.ID(), err)
		}
		terms[n.ID()] = v
	}
	return terms
}

// procLogLengths is how much each node has logged so far.
func procLogLengths(nodes []*testutil.Node) map[string]int {
	at := make(map[string]int)
	for _, n := range nodes {
		at[n.ID()] = len(n.Logs())
	}
	return at
}

// procNoElection checks that no node's term moved from before, and that no
// node's log since logsAt tells of an election: a candidate, a lost
// leadership, or a leader that could not reach a quorum. It logs the
// leader changes seen.
func procNoElection(t *testing.T, nodes []*testutil.Node, before map[string]float64, logsAt map[string]int) {
	t.Helper()
	after := procTerms(t, nodes)
	for _, n := range nodes {
		changes, _ := procMetric(n, "carmy_raft_leader_changes_total")
		signs := 0
		for line := range strings.Lines(n.Logs()[logsAt[n.ID()]:]) {
			for _, sign := range []string{"entering candidate state", "failed to contact quorum", "leadership lost", "heartbeat timeout reached"} {
				if strings.Contains(line, sign) {
					if signs++; signs <= 3 {
						t.Logf("%s: %s", n.ID(), strings.TrimSpace(line))
					}
				}
			}
		}
		t.Logf("%s: term %v before, %v after; %v leader changes seen since it started; %d log lines of an election during the burst", n.ID(), before[n.ID()], after[n.ID()], changes, signs)
		if after[n.ID()] != before[n.ID()] || signs > 0 {
			t.Errorf("%s: an election was held under load (term %v, then %v; %d log lines of one)", n.ID(), before[n.ID()], after[n.ID()], signs)
		}
	}
}

// procMetric reads one unlabelled metric from n's GET /metrics.
func procMetric(n *testutil.Node, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no metric %s", name)
}

// procLoadAvg is the host's load averages, as /proc/loadavg tells them.
func procLoadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
