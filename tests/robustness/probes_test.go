package robustness

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/tests/robustness/ledgerapi"
)

// TestCheckProbes: each probe resolution the ledger contradicts is an
// anomaly, and the clean ones are counted.
func TestCheckProbes(t *testing.T) {
	entry := func(seq uint64, key, exec string) ledgerapi.Entry {
		return ledgerapi.Entry{Seq: seq, IdempotencyKey: "ik-" + key, RequestID: key, ExecutionID: exec, Value: "v"}
	}
	probe := func(entries uint64, key, exec string, seq uint64) ledgerapi.Probe {
		return ledgerapi.Probe{Entries: entries, IdempotencyKey: "ik-" + key, RequestID: key, ExecutionID: exec, Found: seq != 0, Seq: seq}
	}
	byProbe := func(exec, status string, seq uint64) finalRecord {
		data, _ := json.Marshal(ledgerapi.Result{Seq: seq, ExecutionID: exec, Value: "v"})
		return finalRecord{found: true, rec: client.Execution{ExecutionID: exec, Status: client.Status(status), Data: data, Resolved: true, ResolvedBy: resolvedByProbe}}
	}
	ran := func(exec string) finalRecord {
		return finalRecord{found: true, rec: client.Execution{ExecutionID: exec, Status: client.StatusCompleted}}
	}
	for _, tc := range []struct {
		name    string
		entries []ledgerapi.Entry
		probes  []ledgerapi.Probe
		final   map[string]finalRecord
		want    string     // a part of the one anomaly expected; "" for none
		stats   probeStats // checked when want is ""
	}{
		{"completed by a probe", []ledgerapi.Entry{entry(1, "k", "e1")}, []ledgerapi.Probe{probe(1, "k", "e1", 1)},
			map[string]finalRecord{"k": byProbe("e1", "completed", 1)}, "", probeStats{Asked: 1, Executions: 1, Completed: 1}},
		{"released by a probe, run again by a retry", []ledgerapi.Entry{entry(1, "k", "e2")},
			[]ledgerapi.Probe{probe(0, "k", "e1", 0), probe(0, "k", "e1", 0)},
			map[string]finalRecord{"k": ran("e2")}, "", probeStats{Asked: 2, Executions: 1, Released: 1, RanAgain: 1}},
		{"released by a probe, never called again", nil, []ledgerapi.Probe{probe(0, "k", "e1", 0)},
			map[string]finalRecord{"k": {}}, "", probeStats{Asked: 1, Executions: 1, Released: 1}},
		{"a 404 whose release did not commit, then a late result", []ledgerapi.Entry{entry(1, "k", "e1")}, []ledgerapi.Probe{probe(0, "k", "e1", 0)},
			map[string]finalRecord{"k": ran("e1")}, "", probeStats{Asked: 1, Executions: 1}},
		{"completed by a probe without a ledger entry", nil, []ledgerapi.Probe{probe(0, "k", "e1", 0)},
			map[string]finalRecord{"k": byProbe("e1", "completed", 1)}, "with 0 ledger entries", probeStats{}},
		{"completed by a probe, ran twice", []ledgerapi.Entry{entry(1, "k", "e1"), entry(2, "k", "e9")}, []ledgerapi.Probe{probe(2, "k", "e1", 1)},
			map[string]finalRecord{"k": byProbe("e1", "completed", 1)}, "with 2 ledger entries", probeStats{}},
		{"completed by a probe as another execution", []ledgerapi.Entry{entry(1, "k", "e9")}, []ledgerapi.Probe{probe(1, "k", "e1", 1)},
			map[string]finalRecord{"k": byProbe("e1", "completed", 1)}, "the ledger ran e9", probeStats{}},
		{"completed by a probe with other data", []ledgerapi.Entry{entry(1, "k", "e1")}, []ledgerapi.Probe{probe(1, "k", "e1", 1)},
			map[string]finalRecord{"k": byProbe("e1", "completed", 7)}, "with data", probeStats{}},
		{"completed by a probe the ledger never answered", []ledgerapi.Entry{entry(1, "k", "e1")}, nil,
			map[string]finalRecord{"k": byProbe("e1", "completed", 1)}, "answered no probe", probeStats{}},
		{"resolved by a probe as failed", []ledgerapi.Entry{entry(1, "k", "e1")}, []ledgerapi.Probe{probe(1, "k", "e1", 1)},
			map[string]finalRecord{"k": byProbe("e1", "failed", 1)}, "want completed", probeStats{}},
		{"released by a probe, yet it ran", []ledgerapi.Entry{entry(1, "k", "e1")}, []ledgerapi.Probe{probe(0, "k", "e1", 0)},
			map[string]finalRecord{"k": {}}, "yet it ran", probeStats{}},
		{"released by a probe while the ledger had it", []ledgerapi.Entry{entry(1, "k", "e1")}, []ledgerapi.Probe{probe(1, "k", "e1", 0)},
			map[string]finalRecord{"k": ran("e1")}, "found=false with 1 entries", probeStats{}},
		{"found before the entry came", []ledgerapi.Entry{entry(1, "k", "e1")}, []ledgerapi.Probe{probe(0, "k", "e1", 1)},
			map[string]finalRecord{"k": ran("e1")}, "found=true with 0 entries", probeStats{}},
		{"asked by another key than the tool sent", []ledgerapi.Entry{entry(1, "k", "e1")},
			[]ledgerapi.Probe{func() ledgerapi.Probe { p := probe(1, "k", "e1", 0); p.IdempotencyKey = "other"; return p }()},
			map[string]finalRecord{"k": ran("e1")}, "the tool sent", probeStats{}},
	} {
		st, got := checkProbes(tc.entries, tc.probes, tc.final)
		switch {
		case tc.want == "" && len(got) != 0:
			t.Errorf("%s: anomalies %q, want none", tc.name, got)
		case tc.want == "" && st != tc.stats:
			t.Errorf("%s: stats %+v, want %+v", tc.name, st, tc.stats)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
			t.Errorf("%s: anomalies %q, want one with %q", tc.name, got, tc.want)
		}
	}
}
