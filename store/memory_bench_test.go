package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

// memBlock is how many identities the sequential benchmarks reserve before
// they swap in a fresh store (timer stopped): about the default capacity,
// so the tables stay the size a real Memory store has.
const memBlock = 1 << 13

var (
	benchT0   = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	benchData = json.RawMessage(`{"order_id":"ord_5521","status":"accepted"}`)
)

// memCall is one prepared identity and execution.
type memCall struct {
	key  store.Key
	exec store.Execution
	res  store.Result
}

func memCalls(n int) []memCall {
	out := make([]memCall, n)
	for i := range out {
		id := "exec_bench_" + strconv.Itoa(i)
		out[i] = memCall{
			key:  store.Key{Principal: "alice", Session: "s" + strconv.Itoa(i%16), RequestID: "req-" + strconv.Itoa(i)},
			exec: store.Execution{ID: id, Tool: "create_order", NodeID: "node1", StartedAt: benchT0},
			res:  store.Result{ExecutionID: id, Status: store.StatusCompleted, Data: benchData, FinishedAt: benchT0.Add(time.Second)},
		}
	}
	return out
}

// reserveComplete runs one call's two store writes and checks them.
func reserveComplete(ctx context.Context, m *store.Memory, c *memCall) error {
	res, err := m.Reserve(ctx, c.key, "fp", c.exec)
	if err != nil || res.Outcome != store.Reserved {
		return fmt.Errorf("Reserve(%s) = %v, %v", c.key, res.Outcome, err)
	}
	if _, err := m.Complete(ctx, c.key, "fp", c.res); err != nil {
		return fmt.Errorf("Complete(%s): %w", c.key, err)
	}
	return nil
}

// BenchmarkMemoryReserveComplete measures one call's Reserve + Complete of
// a fresh identity on the in-memory store.
func BenchmarkMemoryReserveComplete(b *testing.B) {
	ctx := context.Background()
	calls := memCalls(memBlock)
	m := store.NewMemory(memBlock)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == memBlock {
			b.StopTimer()
			m, i = store.NewMemory(memBlock), 0
			b.StartTimer()
		}
		if err := reserveComplete(ctx, m, &calls[i]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkMemoryReplay measures Reserve of an identity that is already
// finished (the replay answer).
func BenchmarkMemoryReplay(b *testing.B) {
	ctx := context.Background()
	c := memCalls(1)[0]
	m := store.NewMemory(0)
	if err := reserveComplete(ctx, m, &c); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := m.Reserve(ctx, c.key, "fp", c.exec); err != nil || res.Outcome != store.Replay {
			b.Fatalf("Reserve = %v, %v; want replay", res.Outcome, err)
		}
	}
}

// BenchmarkMemoryReserveCompleteParallel measures Reserve + Complete of
// fresh identities from GOMAXPROCS goroutines sharing one store (which
// grows to b.N records).
func BenchmarkMemoryReserveCompleteParallel(b *testing.B) {
	ctx := context.Background()
	calls := memCalls(b.N)
	m := store.NewMemory(max(b.N, 1))
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := reserveComplete(ctx, m, &calls[next.Add(1)-1]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkMemoryReplayParallel measures replays of finished identities
// from GOMAXPROCS goroutines sharing one store.
func BenchmarkMemoryReplayParallel(b *testing.B) {
	ctx := context.Background()
	calls := memCalls(64)
	m := store.NewMemory(0)
	for i := range calls {
		if err := reserveComplete(ctx, m, &calls[i]); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := &calls[int(next.Add(1)-1)%len(calls)]
		for pb.Next() {
			if res, err := m.Reserve(ctx, c.key, "fp", c.exec); err != nil || res.Outcome != store.Replay {
				b.Errorf("Reserve = %v, %v; want replay", res.Outcome, err)
				return
			}
		}
	})
}
