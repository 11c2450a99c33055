package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestBlackBoxProbeResolvesADeadRunnersCall: docs/config.md#reconcile-probes across nodes. A
// call runs on a follower of three, whose process is killed mid-call; the
// cluster marks the execution interrupted, and the leader's reconcile
// probe asks the upstream by the call's idempotency key and resolves it
// completed with the upstream's answer, by "probe", visible from every
// live node. The upstream saw the tool once and the probe once: no two
// nodes settled the execution twice.
func TestBlackBoxProbeResolvesADeadRunnersCall(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	var calls, probes atomic.Int32
	var probedKey atomic.Value
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	up := testutil.StartUpstream(t, nil, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/orders/by-key/") {
			probes.Add(1)
			probedKey.Store(strings.TrimPrefix(r.URL.Path, "/orders/by-key/"))
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"order_id":5}`)
			return
		}
		calls.Add(1)
		io.Copy(io.Discard, r.Body)
		select {
		case started <- struct{}{}:
		default:
		}
		select { // the tool hangs until its runner dies or the test ends
		case <-r.Context().Done():
		case <-release:
		}
	})
	config := fmt.Sprintf(`tools:
  - name: place_order
    timeout: 60s
    http:
      url: %[1]s/orders
    reconcile:
      url: %[1]s/orders/by-key/{idempotency_key}
`, up.URL)
	path := filepath.Join(t.TempDir(), "carmy.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := testutil.BuildCarmy(t)
	c := testutil.StartCluster(t, bin, 3, testutil.StartOptions{}, "--dev", "--fast-failover", "--config", path)
	leader := c.Leader(t, 60*time.Second)
	runner := c.Followers(leader)[0]

	go http.Post(runner.URL+"/v1/tools/call", "application/json",
		strings.NewReader(`{"tool":"place_order","arguments":{"sku":"KB-01"},"request_id":"order-dead-runner"}`))
	select {
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatal("the tool did not start")
	}
	runner.Kill()
	killed := time.Now()

	type rec struct {
		ExecutionID string          `json:"execution_id"`
		Status      string          `json:"status"`
		Data        json.RawMessage `json:"data"`
		Resolved    bool            `json:"resolved"`
		ResolvedBy  string          `json:"resolved_by"`
		NodeID      string          `json:"node_id"`
	}
	var got rec
	testutil.WaitFor(t, 90*time.Second, "the probe to resolve the dead runner's call", func() error {
		code, body := bbGet(t, leader.URL+"/v1/executions?request_id=order-dead-runner")
		if err := json.Unmarshal([]byte(body), &got); code != http.StatusOK || err != nil {
			return fmt.Errorf("%d %s", code, body)
		}
		if got.Status != "completed" {
			return fmt.Errorf("status %s", got.Status)
		}
		return nil
	})
	t.Logf("resolved by the probe %s after the runner was killed", time.Since(killed).Round(time.Millisecond))
	if !got.Resolved || got.ResolvedBy != "probe" || string(got.Data) != `{"order_id":5}` || got.NodeID != runner.ID() {
		t.Fatalf("the record = %+v; want completed with the probe's data, resolved by probe, run by %s", got, runner.ID())
	}
	// Every live node replays it so.
	for _, n := range c.Running() {
		code, body := bbPost(t, n.URL+"/v1/tools/call", `{"tool":"place_order","arguments":{"sku":"KB-01"},"request_id":"order-dead-runner"}`)
		if code != http.StatusOK || !strings.Contains(body, `"replayed":true`) || !strings.Contains(body, `"resolved_by":"probe"`) {
			t.Errorf("retry through %s: %d %s; want the replay, resolved by probe", n.ID(), code, body)
		}
	}
	if n, p := calls.Load(), probes.Load(); n != 1 || p != 1 {
		t.Errorf("the upstream saw the tool %d times and the probe %d times; want 1 and 1", n, p)
	}
	if k, _ := probedKey.Load().(string); !strings.HasPrefix(k, "carmy_") {
		t.Errorf("the probe asked about %q, want the call's idempotency key", k)
	}
	// The node writes its log in batches (at most 50 ms late): poll.
	testutil.WaitUntil(t, 10*time.Second, "the leader's audit line of the probe's resolution", func() bool {
		return strings.Contains(leader.Logs(), "msg=audit action=resolve principal=probe")
	})
	code, metrics := bbGet(t, leader.URL+"/metrics")
	if code != http.StatusOK || !strings.Contains(metrics, `carmy_reconcile_probes_total{outcome="completed",tool="place_order"} 1`) {
		t.Errorf("the leader's metrics lack the probe: %d", code)
	}
}
