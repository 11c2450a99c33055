package cluster_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestProcessBurstOfLargeResults: a burst of 80 concurrent calls with
// 900 KiB of arguments on a follower of a 3-node cluster, whose results
// (the echo tool answers its arguments) together pass the leader's old
// 64 MiB body limit for forwarded batches (70 MiB), all finish completed
// and replay through another node; no execution is left running.
//
// Before the forwarder bounded its batches by bytes, concurrent
// completions went to the leader in batches of tens of MiB, each answered
// with every result back; a batch past 64 MiB was refused whole, and the
// follower read that refusal as an invalid completion, so its executions
// stayed running for good and every retry answered EXECUTION_UNCERTAIN.
//
// A call may first answer 503 UNAVAILABLE (its tool ran but its outcome
// was not recorded within the store timeout, or its reservation could not
// be confirmed) on a slow machine: the client then retries with the same
// request_id, as docs/guarantees.md tells clients to, and so does it on 409
// EXECUTION_UNCERTAIN while the outcome is being recorded. What must hold
// is the outcome; the answers that were not at once completed are counted
// in the log.
func TestProcessBurstOfLargeResults(t *testing.T) {
	procSkipShort(t)
	testutil.LongTier(t, "a burst of 900 KiB results on a cluster of processes")
	const (
		calls = 80
		size  = 900 << 10
	)
	bin := testutil.BuildCarmy(t)
	c := testutil.StartCluster(t, bin, 3, testutil.StartOptions{}, "--dev")
	leader := c.Leader(t, procWait)
	follower := c.Followers(leader)[0]
	client := &http.Client{Timeout: 60 * time.Second}
	body := func(i int) string {
		return fmt.Sprintf(`{"tool":"echo","request_id":"burst-%d","arguments":{"i":%d,"s":%q}}`, i, i, strings.Repeat(string(rune('a'+i%26)), size))
	}
	type result struct {
		answer  procAnswer
		err     error
		retried []string // the answers before the last
	}
	results := make([]result, calls)
	deadline := time.Now().Add(2 * time.Minute)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := &results[i]
			for {
				r.answer, r.err = procSend(client, http.MethodPost, follower.URL+"/v1/tools/call", body(i))
				again := r.err != nil || r.answer.status == http.StatusServiceUnavailable || r.answer.uncertain("running")
				if !again || time.Now().After(deadline) {
					return
				}
				msg := r.answer.str("error", "message")
				if r.err != nil {
					msg = r.err.Error()
				}
				r.retried = append(r.retried, fmt.Sprintf("%d %s", r.answer.status, msg))
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	retried := 0
	for i, r := range results {
		if len(r.retried) > 0 {
			if retried++; retried <= 3 {
				t.Logf("call %d answered %d times before its outcome; first: %.240s", i, len(r.retried), r.retried[0])
			}
		}
	}
	t.Logf("%d calls of %d KiB settled in %s; %d were retried", calls, size>>10, time.Since(began).Round(time.Millisecond), retried)
	failed := 0
	for i, r := range results {
		a := r.answer
		if r.err == nil && a.status == http.StatusOK && a.str("status") == "completed" && a.get("data", "i") == float64(i) &&
			len(a.str("data", "s")) == size {
			continue
		}
		if failed++; failed <= 5 {
			t.Errorf("call %d: %v %.300s", i, r.err, a)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d calls did not end completed", failed, calls)
	}
	// Every call replays through another node, with its execution and its
	// data.
	for i := range calls {
		a, err := procSend(client, http.MethodPost, leader.URL+"/v1/tools/call", body(i))
		if err != nil {
			t.Fatalf("replay %d: %v", i, err)
		}
		procWantReplay(t, fmt.Sprint("replay ", i), a, results[i].answer.str("execution_id"))
		if a.str("status") != "completed" || a.get("data", "i") != float64(i) || len(a.str("data", "s")) != size {
			t.Fatalf("replay %d: status %s, data i=%v with %d bytes", i, a.str("status"), a.get("data", "i"), len(a.str("data", "s")))
		}
	}
}
