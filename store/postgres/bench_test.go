package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
)

// benchWorkers are the numbers of concurrent callers measured.
var benchWorkers = []int{1, 16, 64}

var (
	benchRound atomic.Int64
	benchData  = json.RawMessage(`{"order_id":"ord_5521","status":"accepted"}`)
)

// BenchmarkReserveComplete measures one call's two writes, Reserve of a new
// identity and Complete of its execution, by 1, 16 and 64 callers at once:
// on the in-memory store for comparison, and on PostgreSQL (the shared
// test server, fsync on, over a Unix socket; a pool of one connection per
// caller). calls/s is the throughput of whole calls.
func BenchmarkReserveComplete(b *testing.B) {
	for _, workers := range benchWorkers {
		b.Run(fmt.Sprintf("memory/workers=%d", workers), func(b *testing.B) {
			benchCalls(b, store.NewMemory(math.MaxInt32), workers, reserveComplete)
		})
	}
	for _, workers := range benchWorkers {
		b.Run(fmt.Sprintf("postgres/workers=%d", workers), func(b *testing.B) {
			benchCalls(b, benchStore(b, workers), workers, reserveComplete)
		})
	}
}

// BenchmarkReplay measures Reserve of a finished identity (the answer to a
// retry): one read, no lock.
func BenchmarkReplay(b *testing.B) {
	for _, workers := range benchWorkers {
		b.Run(fmt.Sprintf("postgres/workers=%d", workers), func(b *testing.B) {
			s := benchStore(b, workers)
			ctx := context.Background()
			k := store.Key{Principal: "bench", Session: "s", RequestID: "done"}
			ex := store.Execution{ID: fmt.Sprintf("exec_replay_%d", benchRound.Add(1)), Tool: "t", NodeID: "n", StartedAt: t0}
			if _, err := s.Reserve(ctx, k, "fp", ex); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Complete(ctx, k, "fp", completedResult(ex.ID, string(benchData))); err != nil {
				b.Fatal(err)
			}
			benchCalls(b, s, workers, func(ctx context.Context, s store.Store, _ string, i int) error {
				res, err := s.Reserve(ctx, k, "fp", store.Execution{ID: "exec_unused", Tool: "t", NodeID: "n", StartedAt: t0})
				if err == nil && res.Outcome != store.Replay {
					err = fmt.Errorf("outcome %v", res.Outcome)
				}
				return err
			})
		})
	}
}

// benchStore opens a PostgreSQL store in a fresh schema, with a pool of
// one connection per worker and no practical capacity bound.
func benchStore(b *testing.B, workers int) *postgres.Store {
	b.Helper()
	dsn := needServer(b).DSN("postgres") + " pool_max_conns=" + strconv.Itoa(workers)
	return openStore(b, dsn, postgres.Config{Capacity: math.MaxInt32})
}

// reserveComplete is one call of a new identity: Reserve, then Complete.
func reserveComplete(ctx context.Context, s store.Store, round string, i int) error {
	id := "exec_bench_" + round + "_" + strconv.Itoa(i)
	k := store.Key{Principal: "bench", Session: "s" + strconv.Itoa(i%16), RequestID: round + "-" + strconv.Itoa(i)}
	ex := store.Execution{ID: id, Tool: "create_order", NodeID: "node1", StartedAt: t0}
	res, err := s.Reserve(ctx, k, "fp", ex)
	if err != nil || res.Outcome != store.Reserved {
		return fmt.Errorf("Reserve(%s) = %v, %v", k, res.Outcome, err)
	}
	done := store.Result{ExecutionID: id, Status: store.StatusCompleted, Data: benchData, FinishedAt: t0.Add(time.Second)}
	if _, err := s.Complete(ctx, k, "fp", done); err != nil {
		return fmt.Errorf("Complete(%s): %w", k, err)
	}
	return nil
}

// benchCalls runs b.N calls of op on workers goroutines and reports the
// calls per second.
func benchCalls(b *testing.B, s store.Store, workers int, op func(ctx context.Context, s store.Store, round string, i int) error) {
	b.Helper()
	ctx := context.Background()
	round := strconv.FormatInt(benchRound.Add(1), 10)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	// Warm up untimed, one call per worker at once: the pool opens its
	// connections and each prepares its statements, which would otherwise
	// dominate short runs with many workers.
	var warm sync.WaitGroup
	for w := range workers {
		warm.Add(1)
		go func() {
			defer warm.Done()
			if err := op(ctx, s, round+"w", w); err != nil {
				errOnce.Do(func() { firstErr = err })
			}
		}()
	}
	warm.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				if err := op(ctx, s, round, i); err != nil {
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
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}
