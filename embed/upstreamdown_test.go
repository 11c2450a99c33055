package embed_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestUpstreamDownThenBack: issue 26's target. An HTTP tool's upstream
// is down (its port refuses) while 50 agents call it, each with its own
// request_id, retrying on 503 as docs/guarantees.md tells them; then it
// comes back. No call that never reached it leaves a record (none is
// failed), and every identity runs exactly once once it is back.
// CARMY_UPSTREAM_DOWN_SECONDS sets how long it stays down at least
// (default 3; the figure is 10); it stays down until every agent
// has been refused once (or has stopped calling), too.
func TestUpstreamDownThenBack(t *testing.T) {
	t.Parallel() // a node of its own on ports the kernel picks
	down := 3 * time.Second
	if s := os.Getenv("CARMY_UPSTREAM_DOWN_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("CARMY_UPSTREAM_DOWN_SECONDS=%q: want a positive number", s)
		}
		down = time.Duration(n) * time.Second
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down: the port refuses

	base, _ := startFromYAML(t, fmt.Sprintf("tools:\n  - name: place_order\n    http:\n      url: http://%s/orders\n", addr), withDev())

	const agents = 50
	var mu sync.Mutex
	runs := map[string]int{} // request_id → executions the upstream saw
	started := time.Now()
	var wg sync.WaitGroup
	type outcome struct {
		status int
		body   string
	}
	outcomes := make([]outcome, agents)
	refused := make([]atomic.Int64, agents) // 503 answers before it ran, per agent
	ended := make([]atomic.Bool, agents)    // the agent stopped calling
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range agents {
		wg.Go(func() {
			defer ended[i].Store(true)
			body := fmt.Sprintf(`{"tool":"place_order","arguments":{"agent":%d},"request_id":"agent-%d"}`, i, i)
			deadline := time.Now().Add(down + 60*time.Second)
			for time.Now().Before(deadline) {
				resp, err := client.Post(base+"/v1/tools/call", "application/json", strings.NewReader(body))
				if err != nil {
					outcomes[i].body = err.Error()
					return
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				outcomes[i].status, outcomes[i].body = resp.StatusCode, string(raw)
				if resp.StatusCode != http.StatusServiceUnavailable {
					return
				}
				refused[i].Add(1)
				time.Sleep(200 * time.Millisecond) // the agent's backoff
			}
		})
	}
	// Down for the while, and until every agent was refused (or gave up:
	// its answer is checked below); then back on the same address.
	testutil.WaitFor(t, down+30*time.Second, "the outage to last its length and every agent to be refused", func() error {
		if d := time.Since(started); d < down {
			return fmt.Errorf("down for %s of %s", d.Round(time.Millisecond), down)
		}
		for i := range agents {
			if refused[i].Load() == 0 && !ended[i].Load() {
				return fmt.Errorf("agent %d not refused yet", i)
			}
		}
		return nil
	})
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	testutil.StartUpstream(t, ln, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		runs[r.Header.Get("Carmy-Request-Id")]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	})
	wg.Wait()
	t.Logf("the upstream was down for %s; all %d agents done %s after the start", down, agents, time.Since(started).Round(time.Millisecond))

	total := int64(0)
	for i, o := range outcomes {
		total += refused[i].Load()
		var rec struct{ Status string }
		json.Unmarshal([]byte(o.body), &rec)
		if o.status != http.StatusOK || rec.Status != "completed" {
			t.Errorf("agent %d ended with %d %s; want 200 completed", i, o.status, o.body)
		}
	}
	t.Logf("%d answers were 503 (the tool did not run) while it was down", total)
	if total == 0 {
		t.Error("no call was refused while the upstream was down: the test did not test that")
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range agents {
		if got := runs[fmt.Sprintf("agent-%d", i)]; got != 1 {
			t.Errorf("agent-%d ran %d times at the upstream, want 1", i, got)
		}
	}
	// No record was left failed by a call that never reached it.
	code, body := testutil.Do(t, http.MethodGet, base+"/v1/executions?status=failed&session_id=", "", "")
	if code != http.StatusOK || strings.Contains(body, `"execution_id"`) {
		t.Errorf("failed records after the outage: %d %s; want none", code, body)
	}
}
