package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store"
)

// TestGroupCommit checks that concurrent writes share log writes and log
// entries: 256 reservations at once, half on the leader and half
// forwarded by a follower, take far fewer Raft log appends than
// commands on every node, and as many log entries as the leader had
// rounds (one batch entry per round), and all of them succeed.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	regs := map[string]*prometheus.Registry{}
	c := newCluster(t, 3, func(cfg *cluster.Config) {
		reg := prometheus.NewRegistry()
		regs[cfg.NodeID] = reg
		cfg.Metrics = reg
		// Production timers: this test is not about failover, and a busy
		// machine must not turn 256 writes into an election.
		cfg.Fast = false
	})
	leader, follower := c.leader(), c.followers()[0]
	c.waitReady()
	before, beforeEntries := map[string]float64{}, map[string]float64{}
	for id, reg := range regs {
		before[id] = gather(t, reg)["carmy_raft_log_writes_total"]
		beforeEntries[id] = gather(t, reg)["carmy_raft_log_entries_total"]
	}

	const n = 256
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		node := leader
		if i%2 == 1 {
			node = follower
		}
		wg.Go(func() {
			k := key(fmt.Sprintf("group-%d", i))
			res, err := node.Store().Reserve(context.Background(), k, "fp", exec(node.ID()))
			if err == nil && res.Outcome != store.Reserved {
				err = fmt.Errorf("Reserve(%s) = %v", k, res.Outcome)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	lm := gather(t, regs[leader.ID()])
	if rounds := lm["carmy_raft_round_commands"]; rounds == 0 || rounds > n/4 {
		t.Errorf("the leader committed %d commands in %v rounds, want at most %d", n, rounds, n/4)
	}
	for id, reg := range regs {
		writes := gather(t, reg)["carmy_raft_log_writes_total"] - before[id]
		if writes > n/4 {
			t.Errorf("%s: %v log writes for %d commands, want at most %d", id, writes, n, n/4)
		}
		// One entry per round; a few more may be Raft's own (a
		// configuration change, a no-op on election).
		entries := gather(t, reg)["carmy_raft_log_entries_total"] - beforeEntries[id]
		if entries > lm["carmy_raft_round_commands"]+4 {
			t.Errorf("%s: %v log entries for %v rounds of %d commands, want one entry per round", id, entries, lm["carmy_raft_round_commands"], n)
		}
	}
}
