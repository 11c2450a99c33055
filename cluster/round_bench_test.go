package cluster_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// benchSeq numbers the benchmarks' identities and executions, unique
// across sub-benchmarks and their reruns on one cluster.
var benchSeq atomic.Int64

// benchCluster starts a 3-node cluster on loopback whose capacity never
// fills and whose leader never marks executions interrupted because
// gossip lagged under load.
func benchCluster(b *testing.B) *testCluster {
	b.Helper()
	return newCluster(b, 3, func(cfg *cluster.Config) {
		cfg.MaxEntries = 1 << 24
		cfg.DeadGrace = time.Hour
	})
}

// round reserves a fresh identity through s and completes it, as a call
// whose tool ran does.
func round(ctx context.Context, s *cluster.Store, node string) error {
	n := strconv.FormatInt(benchSeq.Add(1), 10)
	k := store.Key{Principal: "p", Session: "bench", RequestID: "req-" + n}
	ex := store.Execution{ID: "exec_bench_" + n, Tool: "t", NodeID: node, StartedAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	res, err := s.Reserve(ctx, k, "fp", ex)
	if err != nil || res.Outcome != store.Reserved {
		return fmt.Errorf("Reserve(%s) = %v, %v", k, res.Outcome, err)
	}
	if _, err := s.Complete(ctx, k, "fp", completed(ex.ID)); err != nil {
		return fmt.Errorf("Complete(%s): %w", k, err)
	}
	return nil
}

// benchRounds runs one round per iteration through n's store, after one
// warm-up round that opens connections.
func benchRounds(b *testing.B, n *testNode) {
	ctx, s := context.Background(), n.Store()
	if err := round(ctx, s, n.ID()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := round(ctx, s, n.ID()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClusterRound measures one call's two replicated writes
// (Reserve, then Complete of a fresh identity) on a 3-node cluster.
func BenchmarkClusterRound(b *testing.B) {
	c := benchCluster(b)
	leader, follower := c.leader(), c.followers()[0]

	// leader: both writes proposed on the leader.
	b.Run("leader", func(b *testing.B) { benchRounds(b, leader) })

	// follower: both writes forwarded by a follower to the leader.
	b.Run("follower", func(b *testing.B) { benchRounds(b, follower) })

	// leader-parallel64: 64 goroutines proposing on the leader at once,
	// so Raft batches their entries.
	b.Run("leader-parallel64", func(b *testing.B) {
		ctx, s := context.Background(), leader.Store()
		b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := round(ctx, s, leader.ID()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkClusterReplay measures Reserve, on a follower, of an identity
// whose execution finished: answered from the follower's applied state.
func BenchmarkClusterReplay(b *testing.B) {
	c := benchCluster(b)
	leader, follower := c.leader(), c.followers()[0]
	ctx := context.Background()
	k := key("replayed")
	ex := exec(leader.ID())
	mustReserve(b, leader.Store(), k, ex, store.Reserved)
	if _, err := leader.Store().Complete(ctx, k, "fp", completed(ex.ID)); err != nil {
		b.Fatal(err)
	}
	testutil.WaitUntil(b, 10*time.Second, "the follower to apply the completion", func() bool {
		rec, err := follower.FSM().Lookup(k)
		return err == nil && rec.Status.Finished()
	})

	// follower: the replay answer on a follower.
	b.Run("follower", func(b *testing.B) {
		s := follower.Store()
		b.ReportAllocs()
		for b.Loop() {
			if res, err := s.Reserve(ctx, k, "fp", ex); err != nil || res.Outcome != store.Replay {
				b.Fatalf("Reserve = %v, %v; want replay", res.Outcome, err)
			}
		}
	})
}

// BenchmarkStoreReserveComplete measures the Raft-backed store as a
// library user's store.Store: one call's two writes (Reserve of a new
// identity, Complete of its execution) by 1, 16 and 64 callers at once, on
// the leader of a 1-node and of a 3-node cluster. calls/s is the
// throughput of whole calls; store/postgres has the same benchmark for the
// in-memory and PostgreSQL stores.
func BenchmarkStoreReserveComplete(b *testing.B) {
	for _, size := range []int{1, 3} {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			c := newCluster(b, size, func(cfg *cluster.Config) {
				cfg.MaxEntries = 1 << 24
				cfg.DeadGrace = time.Hour
			})
			leader := c.leader()
			for _, workers := range []int{1, 16, 64} {
				b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
					benchWorkers(b, leader, workers)
				})
			}
		})
	}
}

// benchWorkers runs b.N rounds through n's store on workers goroutines
// and reports whole calls per second.
func benchWorkers(b *testing.B, n *testNode, workers int) {
	ctx, s := context.Background(), n.Store()
	if err := round(ctx, s, n.ID()); err != nil {
		b.Fatal(err)
	}
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if err := round(ctx, s, n.ID()); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}
