package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// gather returns every sample of reg by metric name (summed over labels,
// counts for histograms and summaries), and also by name{label="value"}
// for each label of a labelled metric.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := make(map[string]float64)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[mf.GetName()] += value(m)
			for _, l := range m.GetLabel() {
				out[fmt.Sprintf("%s{%s=%q}", mf.GetName(), l.GetName(), l.GetValue())] += value(m)
			}
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	case m.Summary != nil:
		return float64(m.Summary.GetSampleCount())
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

func TestMetricsOfACluster(t *testing.T) {
	t.Parallel()
	regs := map[string]*prometheus.Registry{}
	c := newCluster(t, 3, func(cfg *cluster.Config) {
		reg := prometheus.NewRegistry()
		regs[cfg.NodeID] = reg
		cfg.Metrics = reg
		cfg.Fast = false // not about failover: no election on a busy machine
	})
	leader := c.leader()
	follower := c.followers()[0]
	before := gather(t, regs[follower.ID()])
	const n = 20
	for i := range n {
		k := key(fmt.Sprintf("metrics-%d", i))
		rec := mustReserve(t, follower.Store(), k, exec(follower.ID()), store.Reserved)
		if _, err := follower.Store().Complete(context.Background(), k, "fp", completed(rec.ExecutionID)); err != nil {
			t.Fatalf("Complete: %v", err)
		}
	}
	// The majority that committed may not include this follower yet.
	testutil.WaitUntil(t, 30*time.Second, "the follower to apply every write", func() bool {
		return follower.FSM().AppliedIndex() >= leader.FSM().AppliedIndex()
	})
	after := gather(t, regs[follower.ID()])
	// A try the leader did not take (not sent, or sent to a node that was
	// no longer leader) is forwarded again; each such try is counted as an
	// error of its kind.
	delta := func(name string) float64 { return after[name] - before[name] }
	retried := delta(`carmy_forward_errors_total{kind="not_sent"}`) + delta(`carmy_forward_errors_total{kind="not_leader"}`)
	if retried > 0 {
		t.Logf("%v forwarded tries were not taken and tried again (not sent %v, not leader %v)", retried,
			delta(`carmy_forward_errors_total{kind="not_sent"}`), delta(`carmy_forward_errors_total{kind="not_leader"}`))
	}
	if d := delta("carmy_forward_commands_total"); d != 2*n+retried {
		t.Errorf("the follower forwarded %v commands, want %d and %v tried again", d, 2*n, retried)
	}
	if d := delta("carmy_forward_errors_total"); d != retried {
		t.Errorf("the follower counted %v forwarding errors, %v of them tried again; want none that failed a call", d, retried)
	}
	if d := after["carmy_forward_batches_total"] - before["carmy_forward_batches_total"]; d < 1 || d > 2*n+retried {
		t.Errorf("the follower sent %v batches for %v commands", d, 2*n+retried)
	}
	if d := after["carmy_raft_log_entries_total"] - before["carmy_raft_log_entries_total"]; d < 2*n {
		t.Errorf("the follower wrote %v log entries, want at least %d", d, 2*n)
	}
	if after["carmy_raft_log_writes_total"] <= before["carmy_raft_log_writes_total"] {
		t.Error("the follower's log writes did not grow")
	}
	if after["carmy_raft_state"] != 0 || after["carmy_raft_voters"] != 3 {
		t.Errorf("follower: carmy_raft_state %v, carmy_raft_voters %v; want 0 and 3", after["carmy_raft_state"], after["carmy_raft_voters"])
	}

	lm := gather(t, regs[leader.ID()])
	if lm["carmy_raft_state"] != 2 {
		t.Errorf("leader: carmy_raft_state %v, want 2", lm["carmy_raft_state"])
	}
	if lm["carmy_raft_applies_total"] < 2*n || lm["carmy_raft_apply_duration_seconds"] < 2*n {
		t.Errorf("leader: %v applies, %v apply durations; want at least %d", lm["carmy_raft_applies_total"], lm["carmy_raft_apply_duration_seconds"], 2*n)
	}
	if lm["carmy_raft_leader_changes_total"] < 1 {
		t.Error("leader: no leader change counted")
	}
	// Raft's, memberlist's and the WAL's own metrics reach the registry
	// through go-metrics.
	for _, prefix := range []string{"carmy_raft_commitTime", "carmy_raft_wal_storeLogs", "carmy_memberlist_"} {
		found := false
		for name := range lm {
			found = found || strings.HasPrefix(name, prefix)
		}
		if !found {
			t.Errorf("no metric named %s… in the leader's registry", prefix)
		}
	}
}
