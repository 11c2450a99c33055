package robustness

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// report sums up one run.
type report struct {
	Store          string // "raft" or "postgres"
	Nodes, Clients int
	Seed           uint64
	Duration       time.Duration
	Ops            int
	ByKind         map[Kind]int
	ByTransport    map[string]int // operations by transport ("http", "mcp/<version>")
	Mixed          int            // identities answered with a result over both HTTP and MCP
	Uncertain      map[string]int // EXECUTION_UNCERTAIN answers by status
	Identities     int
	Executions     int // ledger entries
	Resent         int // of them: a request of an execution the ledger had cut before (Args.Lose), delivered again
	Probes         probeStats
	Gates          gateStats // the gated calls and the approver's decisions
	Faults         []faultEvent
	UnavailableSec int
	Digest         digest
	Anomalies      []string
	Linearizable   string // porcupine's verdict
	Visualizations []string
	MaxShown       int // String lists at most this many anomalies (0: all)
}

// unavailableSeconds counts the whole seconds of the run in which calls
// were made and none got a settled answer (a result, a conflict, an
// uncertain report or a gated call's awaiting_approval).
func unavailableSeconds(ops []Op) int {
	tried, answered := map[int64]bool{}, map[int64]bool{}
	for _, op := range ops {
		s := op.Call / int64(time.Second)
		tried[s] = true
		if op.Kind == KindOK || op.Kind == KindConflict || op.Kind == KindUncertain || op.Kind == KindAwaiting {
			answered[s] = true
		}
	}
	n := 0
	for s := range tried {
		if !answered[s] {
			n++
		}
	}
	return n
}

// String renders the report as the harness prints it.
func (r report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "robustness run (%s): %d nodes, %d clients, seed %d, %s of workload\n", r.Store, r.Nodes, r.Clients, r.Seed, r.Duration.Round(time.Second))
	fmt.Fprintf(&b, "  operations      %d on %d identities; tool executions (ledger) %d, %d of them a cut request delivered again\n", r.Ops, r.Identities, r.Executions, r.Resent)
	for _, k := range []Kind{KindOK, KindConflict, KindUncertain, KindUnavailable, KindUnknown, KindAwaiting} {
		fmt.Fprintf(&b, "    %-12s %d\n", k, r.ByKind[k])
	}
	b.WriteString("  by transport   ")
	for _, t := range slices.Sorted(maps.Keys(r.ByTransport)) {
		fmt.Fprintf(&b, " %s=%d", t, r.ByTransport[t])
	}
	fmt.Fprintf(&b, "; %d identities answered with a result over both\n", r.Mixed)
	fmt.Fprintf(&b, "  uncertain answers %d (EXECUTION_UNCERTAIN: %d running, %d interrupted), unknown outcomes %d\n",
		r.ByKind[KindUncertain], r.Uncertain[statusRunning], r.Uncertain[statusInterrupted], r.ByKind[KindUnknown])
	p := r.Probes
	fmt.Fprintf(&b, "  reconcile probes %d, about %d interrupted executions: resolved by probe %d completed, %d released (%d run again by a retry)\n",
		p.Asked, p.Executions, p.Completed, p.Released, p.RanAgain)
	g := r.Gates
	fmt.Fprintf(&b, "  approval gates: %d calls on %d gated identities, %d answered awaiting; approver learned of %d: approved %d (%d of them answered EXECUTION_UNCERTAIN), denied %d, left to expire %d, decided already %d, gone %d, released after an uncertain approval %d, %d decisions sent again\n",
		g.Calls, g.Identities, g.Awaiting, g.Learned, g.Approved, g.Uncertain, g.Denied, g.Ignored, g.Already, g.Gone, g.Released, g.Retried)
	b.WriteString("    gated identities by final status:")
	for _, s := range slices.Sorted(maps.Keys(g.Final)) {
		fmt.Fprintf(&b, " %s=%d", s, g.Final[s])
	}
	fmt.Fprintf(&b, "; ran on the ledger %d\n", g.Ran)
	fmt.Fprintf(&b, "  unavailable seconds %d\n", r.UnavailableSec)
	byKind := map[string]int{}
	for _, f := range r.Faults {
		byKind[f.Kind]++
	}
	fmt.Fprintf(&b, "  faults injected %d:", len(r.Faults))
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		fmt.Fprintf(&b, " %s=%d", k, byKind[k])
	}
	b.WriteString("\n")
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "    %6.1fs–%6.1fs %-22s %-16v whole again after %4.1fs", f.At.Seconds(), f.Healed.Seconds(), f.Kind, f.Targets, (f.Whole - f.Healed).Seconds())
		if f.Effect != "" {
			fmt.Fprintf(&b, "; %s", f.Effect)
		}
		if f.Err != "" {
			fmt.Fprintf(&b, " (%s)", f.Err)
		}
		b.WriteString("\n")
	}
	if r.Store != storePostgres { // a fleet has no replicas to converge
		fmt.Fprintf(&b, "  converged at applied index %d, state hash %.16s…, %d records\n", r.Digest.AppliedIndex, r.Digest.Hash, r.Digest.Records)
	}
	fmt.Fprintf(&b, "  linearizability: %s\n", r.Linearizable)
	for _, v := range r.Visualizations {
		fmt.Fprintf(&b, "    visualization: %s\n", v)
	}
	fmt.Fprintf(&b, "  anomalies %d\n", len(r.Anomalies))
	for i, a := range r.Anomalies {
		if i == r.MaxShown && r.MaxShown > 0 {
			fmt.Fprintf(&b, "    … and %d more (report.txt has them all)\n", len(r.Anomalies)-i)
			break
		}
		fmt.Fprintf(&b, "    - %s\n", a)
	}
	return b.String()
}
