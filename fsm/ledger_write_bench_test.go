package fsm

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store/audit"
)

// BenchmarkLedgerWrite measures the ledger writer's commits as a loaded
// node makes them: each commit appends the entries of 700 decisions (a
// 100 ms commit gap at 3,500 calls/s), reserved and completed pairs. It
// reports the cost per entry, the pages written per entry and the file's
// bytes per entry.
func BenchmarkLedgerWrite(b *testing.B) {
	const perCommit = 700
	path := filepath.Join(b.TempDir(), "audit.db")
	l, err := OpenLedger(path)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	group := func(index uint64) ledgerGroup {
		g := ledgerGroup{index: index, drafts: make([]audit.Draft, 0, perCommit)}
		for i := range perCommit {
			kind, status := audit.KindReserved, "running"
			if i%2 == 1 {
				kind, status = audit.Kind("completed"), "completed"
			}
			g.drafts = append(g.drafts, audit.Draft{
				Time: at.Add(time.Duration(index*perCommit+uint64(i)) * time.Microsecond), Actor: "agent-7", Kind: kind,
				ExecutionID: fmt.Sprintf("01JF%022d", index*perCommit+uint64(i/2)), Principal: "agent-7",
				Tool: "send_email", Fingerprint: "sha256:9f2c4e0d1b7a3c5e8f6d2a4b1c3e5f7a9b0d2c4e6f8a1b3d5c7e9f0a2b4c6d8e", Status: status,
			})
		}
		return g
	}
	stats := l.db.Stats()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		g := []ledgerGroup{group(uint64(i + 1))}
		b.StartTimer()
		l.write(g)
	}
	b.StopTimer()
	if err := l.Err(); err != nil {
		b.Fatal(err)
	}
	entries := float64(b.N * perCommit)
	after := l.db.Stats()
	d := after.Sub(&stats)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/entries, "ns/entry")
	b.ReportMetric(float64(after.TxStats.GetWriteTime())/entries, "write-ns/entry")
	b.ReportMetric(float64(d.TxStats.GetWrite())/entries, "page-writes/entry")
	if fi, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(fi.Size())/entries, "file-B/entry")
	}
}
