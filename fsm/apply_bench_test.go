package fsm_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/fsm"
)

const (
	// applyBlock is how many log entries (reserve, complete, reserve, ...
	// of fresh identities) the apply benchmarks prepare; after each block
	// they swap in a fresh FSM with the timer stopped, so that the state
	// never fills up and stays a realistic size.
	applyBlock = 1 << 14
	applyBatch = 64
)

// applyLogs returns the block's entries at indexes 2 onwards, after a
// capacity command at index 1 that leaves room for all of them.
func applyLogs(tb testing.TB) (capacity *raft.Log, logs []*raft.Log) {
	tb.Helper()
	capacity = commandLog(tb, 1, fsm.SetLimits(applyBlock, 0))
	logs = make([]*raft.Log, 0, applyBlock)
	for i := 0; len(logs) < applyBlock; i++ {
		k, id := key("req-"+strconv.Itoa(i)), "exec_bench_"+strconv.Itoa(i)
		logs = append(logs,
			commandLog(tb, uint64(len(logs)+2), fsm.Reserve(k, fp, execution(id, "n1"))),
			commandLog(tb, uint64(len(logs)+3), fsm.Complete(k, fp, completed(id, benchResultData, t0.Add(time.Second)))))
	}
	return capacity, logs
}

// freshFSM returns an empty FSM that applied the capacity entry.
func freshFSM(tb testing.TB, capacity *raft.Log) *fsm.FSM {
	tb.Helper()
	f := fsm.New()
	if r := only(tb, f.Apply(capacity)); r.Code != "" {
		tb.Fatalf("capacity: %s", r.Message)
	}
	return f
}

// checkApplied fails the benchmark when a command was refused.
func checkApplied(tb testing.TB, out any) {
	if rs, ok := out.(fsm.Responses); !ok || len(rs) != 1 || rs[0].Code != "" {
		tb.Fatalf("apply = %#v", out)
	}
}

// BenchmarkFSMApply measures FSM.Apply of one log entry (decode + apply),
// alternating reserve and complete of fresh identities; one op is one
// command.
func BenchmarkFSMApply(b *testing.B) {
	capacity, logs := applyLogs(b)
	f := freshFSM(b, capacity)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % applyBlock
		if j == 0 && i > 0 {
			b.StopTimer()
			f = freshFSM(b, capacity)
			b.StartTimer()
		}
		checkApplied(b, f.Apply(logs[j]))
	}
}

// BenchmarkFSMApplyBatch measures FSM.ApplyBatch with batches of 64 log
// entries, as Raft delivers them under load; one op is one command.
func BenchmarkFSMApplyBatch(b *testing.B) {
	capacity, logs := applyLogs(b)
	f := freshFSM(b, capacity)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		j := i % applyBlock
		if j == 0 && i > 0 {
			b.StopTimer()
			f = freshFSM(b, capacity)
			b.StartTimer()
		}
		n := min(applyBatch, b.N-i, applyBlock-j)
		for _, out := range f.ApplyBatch(logs[j : j+n]) {
			checkApplied(b, out)
		}
		i += n
	}
}
