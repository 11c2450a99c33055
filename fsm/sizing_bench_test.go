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

// BenchmarkSizing measures, for finished records whose result data is S
// bytes (S = 100 B, 1 KiB, 64 KiB), what a node needs per record: the
// live heap of the state machine (heap-B/record), the bytes the record is
// accounted for by --max-bytes and the byte quotas (store.RecordSize,
// accounted-B/record), and the snapshot's bytes (snapshot-B/record). The
// identities are of realistic lengths (a 36-byte request id, a 64-hex
// fingerprint, a 31-byte execution id). It is the README's sizing table:
//
//	go test ./fsm -run '^$' -bench Sizing -benchtime 1x
func BenchmarkSizing(b *testing.B) {
	for _, tc := range []struct {
		size, records int
	}{{100, 20_000}, {1 << 10, 20_000}, {64 << 10, 1_000}} {
		b.Run(fmt.Sprintf("data-%dB", tc.size), func(b *testing.B) {
			tc.records = benchRecords(tc.records)
			data := `"` + strings.Repeat("x", tc.size-2) + `"`
			fingerprint := strings.Repeat("ab", 32)
			for b.Loop() {
				logs := []*raft.Log{commandLog(b, 1, fsm.SetLimits(tc.records, 0))}
				for i := range tc.records {
					k := store.Key{Principal: "agent-planner", Session: "sess-2026-11-30", RequestID: fmt.Sprintf("%08d-9c1e-4d7a-8b2f-3e5a6c7d8e9f", i)}
					id := fmt.Sprintf("exec_01JDX%021d", i)
					ex := store.Execution{ID: id, Tool: "create_order", NodeID: "node1", StartedAt: t0}
					logs = append(logs,
						commandLog(b, uint64(len(logs)+1), fsm.Reserve(k, fingerprint, ex)),
						commandLog(b, uint64(len(logs)+2), fsm.Complete(k, fingerprint, completed(id, data, t0.Add(time.Second)))))
				}
				before, _ := heapInUse()
				f := fsm.New()
				for i := 0; i < len(logs); i += 256 {
					for _, out := range f.ApplyBatch(logs[i:min(i+256, len(logs))]) {
						checkApplied(b, out)
					}
				}
				after, _ := heapInUse()
				runtime.KeepAlive(logs)
				st := f.Stats()
				if st.Entries != tc.records {
					b.Fatalf("%d records, want %d", st.Entries, tc.records)
				}
				snap, err := f.SnapshotBytes()
				if err != nil {
					b.Fatal(err)
				}
				n := float64(tc.records)
				b.ReportMetric(float64(after-before)/n, "heap-B/record")
				b.ReportMetric(float64(st.Bytes)/n, "accounted-B/record")
				b.ReportMetric(float64(len(snap))/n, "snapshot-B/record")
				runtime.KeepAlive(f)
			}
		})
	}
}
