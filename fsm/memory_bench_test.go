package fsm_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// BenchmarkMemoryPerRecord measures the heap a node holds per finished
// record, for results of several sizes, with identities and ids of
// realistic lengths (a 36-byte request id, a 64-hex fingerprint, a
// 31-byte execution id). It reports B/record: what an operator multiplies
// by --max-entries; objects/record, the heap objects among them; and
// GC-ns/record, what a full collection takes per record held (the
// quickest of five; the collector visits every object the records hold,
// so this is the share of its work that grows with them). Run it with
// -benchtime 1x:
//
//	go test ./fsm -run '^$' -bench MemoryPerRecord -benchtime 1x
func BenchmarkMemoryPerRecord(b *testing.B) {
	records := benchRecords(50_000)
	for _, size := range []int{16, 256, 1024} {
		b.Run(fmt.Sprintf("data-%dB", size), func(b *testing.B) {
			data := `{"v":"` + strings.Repeat("x", max(size-8, 0)) + `"}`
			fingerprint := strings.Repeat("ab", 32)
			for b.Loop() {
				var logs []*raft.Log
				logs = append(logs, commandLog(b, 1, fsm.SetLimits(records, 0)))
				for i := range records {
					k := store.Key{Principal: "agent-planner", Session: "sess-2026-11-30", RequestID: fmt.Sprintf("%08d-9c1e-4d7a-8b2f-3e5a6c7d8e9f", i)}
					id := fmt.Sprintf("exec_01JDX%021d", i)
					ex := store.Execution{ID: id, Tool: "create_order", NodeID: "node1", StartedAt: t0}
					logs = append(logs,
						commandLog(b, uint64(len(logs)+1), fsm.Reserve(k, fingerprint, ex)),
						commandLog(b, uint64(len(logs)+2), fsm.Complete(k, fingerprint, completed(id, data, t0.Add(time.Second)))))
				}
				before, objsBefore := heapInUse()
				f := fsm.New()
				for i := 0; i < len(logs); i += 256 {
					for _, out := range f.ApplyBatch(logs[i:min(i+256, len(logs))]) {
						checkApplied(b, out)
					}
				}
				after, objsAfter := heapInUse()
				runtime.KeepAlive(logs)
				logs = nil
				gc := time.Duration(1 << 62)
				for range 5 {
					began := time.Now()
					runtime.GC()
					gc = min(gc, time.Since(began))
				}
				if got := f.Stats().Entries; got != records {
					b.Fatalf("%d records, want %d", got, records)
				}
				b.ReportMetric(float64(after-before)/float64(records), "B/record")
				b.ReportMetric(float64(objsAfter-objsBefore)/float64(records), "objects/record")
				b.ReportMetric(float64(gc.Nanoseconds())/float64(records), "GC-ns/record")
				runtime.KeepAlive(f)
			}
		})
	}
}

// heapInUse returns the live heap and its objects after a full
// collection.
func heapInUse() (bytes, objects uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.HeapObjects
}
