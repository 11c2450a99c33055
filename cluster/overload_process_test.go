package cluster_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestProcessBurstOnBusyHost is the overload of docs/operations.md#overload: bursts of concurrent
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
	testutil.NeedBusyHost(t)
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
	elections := testutil.WatchElections(t, c.Nodes())
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
	// still refused then was answered as docs/operations.md#overload allows.
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
		calls, size>>10, follower.ID(), busyProcs, took.Round(time.Millisecond), completed, refused, failed, testutil.LoadAvg())
	elections.RequireNone(t)
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
// flight (docs/operations.md#overload), whose envelope names the resource and says the tool
// did not run.
func procRefusedUnreserved(a procAnswer) bool {
	res := a.str("error", "resource")
	return a.status == http.StatusServiceUnavailable && a.str("error", "code") == "UNAVAILABLE" &&
		(res == "running" || res == "inflight_bytes") && a.get("error", "tool_ran") == false &&
		a.header.Get("Retry-After") != ""
}
