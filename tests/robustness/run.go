package robustness

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// runConfig is one run of the harness.
type runConfig struct {
	Store    string // storeRaft ("" too) or storePostgres (a fleet: fleet.go)
	Nodes    int
	Clients  int
	Seed     uint64
	Duration time.Duration    // of the workload and the faults
	Hold     [2]time.Duration // how long a fault lasts, at least and at most
	OutDir   string           // where the report and visualisations go
}

// run starts a cluster (or a fleet on PostgreSQL), drives the workload
// against it while the nemesis injects faults and the approver decides
// the gated calls, heals everything, checks
// the history, the ledger and the replicas (a Raft cluster's), and
// returns the report. It fails t on harness errors (the
// cluster does not form, the ledger cannot be read); anomalies are in the
// report for the caller to judge.
func run(t *testing.T, cfg runConfig) report {
	var c *testCluster
	if cfg.Store == storePostgres {
		c = startFleet(t, cfg.Nodes)
	} else {
		c = startCluster(t, cfg.Nodes)
	}
	w := newWorkload(cfg.Seed, c.nc, c)
	nm := newNemesis(c, cfg.Seed, w.start)
	nm.hold = cfg.Hold
	ap := newApprover(cfg.Seed, c.nc, c)

	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration)
	defer cancel()
	nemesisDone, approverDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(nemesisDone)
		nm.run(ctx)
	}()
	go func() {
		defer close(approverDone)
		ap.run(ctx)
	}()
	w.run(ctx, cfg.Clients)
	<-nemesisDone
	<-approverDone

	r := report{Store: cmp.Or(cfg.Store, storeRaft), Nodes: cfg.Nodes, Clients: cfg.Clients, Seed: cfg.Seed, Duration: cfg.Duration, ByKind: map[Kind]int{}, ByTransport: map[string]int{}}
	ops, anomalies := w.history()
	r.Anomalies = append(r.Anomalies, anomalies...)
	nm.mu.Lock()
	r.Faults = append(r.Faults, nm.events...)
	for _, ev := range nm.events {
		if ev.Err != "" {
			r.Anomalies = append(r.Anomalies, fmt.Sprintf("harness: fault %s %v: %s", ev.Kind, ev.Targets, ev.Err))
		}
	}
	r.Anomalies = append(r.Anomalies, nm.anomalies...)
	nm.mu.Unlock()

	// After the last heal: the cluster must be whole again.
	check := context.Background()
	if _, err := c.waitHealthy(check, recoverTimeout); err != nil {
		r.Anomalies = append(r.Anomalies, fmt.Sprintf("not healthy after the run: %v\n%s", err, c.describe()))
	}
	// The approver decides what it has not yet: the gates it leaves
	// undecided expire, which settle waits for.
	if err := ap.drain(approverDrain); err != nil {
		r.Anomalies = append(r.Anomalies, err.Error())
	}
	keys := map[string]bool{}
	r.Uncertain = map[string]int{}
	answeredOver := map[string]map[bool]bool{} // identity → over MCP? → answered with a result
	for _, op := range ops {
		r.ByKind[op.Kind]++
		r.ByTransport[op.Transport]++
		if op.Kind == KindOK {
			if answeredOver[op.Key] == nil {
				answeredOver[op.Key] = map[bool]bool{}
			}
			answeredOver[op.Key][op.Transport != transportHTTP] = true
		}
		if op.Kind == KindUncertain {
			r.Uncertain[op.Status]++
		}
		keys[op.Key] = true
	}
	r.Ops, r.Identities = len(ops), len(keys)
	for _, over := range answeredOver {
		if len(over) == 2 {
			r.Mixed++
		}
	}
	r.UnavailableSec = unavailableSeconds(ops)
	var keyList []string
	for k := range sortedPairs(keys) {
		keyList = append(keyList, k)
	}
	final, stuck := c.settle(check, keyList)
	r.Anomalies = append(r.Anomalies, stuck...)
	if c.fleet == nil { // a fleet has no replicas: one database holds the records
		d, err := c.converge(check)
		if err != nil {
			r.Anomalies = append(r.Anomalies, err.Error()+"\n"+c.describe())
		}
		r.Digest = d
	}
	entries, err := c.ledgerEntries(check)
	if err != nil {
		t.Fatal(err)
	}
	r.Executions = len(entries)
	for _, e := range entries {
		if e.Resent {
			r.Resent++
		}
	}
	w.mu.Lock()
	done := append([]completedAnswer(nil), w.done...)
	w.mu.Unlock()
	decisions, _ := ap.results()
	var (
		approved      []completedAnswer
		gateAnomalies []string
	)
	r.Gates, approved, gateAnomalies = checkGated(ops, decisions, final, entries)
	r.Anomalies = append(r.Anomalies, gateAnomalies...)
	r.Anomalies = append(r.Anomalies, checkLedger(entries, append(done, approved...), final)...)
	probes, err := c.ledgerProbes(check)
	if err != nil {
		t.Fatal(err)
	}
	var probeAnomalies []string
	r.Probes, probeAnomalies = checkProbes(entries, probes, final)
	r.Anomalies = append(r.Anomalies, probeAnomalies...)
	r.Anomalies = append(r.Anomalies, checkReplays(ops)...)

	name := fmt.Sprintf("n%d-seed%d", cfg.Nodes, cfg.Seed)
	if c.fleet != nil {
		name = "postgres-" + name
	}
	dir := filepath.Join(cfg.OutDir, name)
	// The model has no gate: the gated identities are checkGated's.
	v, err := CheckHistory(ungated(ops), dir, 2*time.Minute)
	switch {
	case err != nil:
		r.Anomalies = append(r.Anomalies, "checking the history: "+err.Error())
		r.Linearizable = "not checked"
	case v.OK:
		r.Linearizable = fmt.Sprintf("ok (%d identities)", v.Keys)
	default:
		r.Linearizable = fmt.Sprintf("NOT linearizable: %d of %d identities", len(v.Failed), v.Keys)
		for _, k := range v.Failed {
			r.Anomalies = append(r.Anomalies, "not linearizable: "+k)
		}
		r.Visualizations = v.Visualizations
	}
	if err := os.MkdirAll(dir, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "report.txt"), []byte(r.String()), 0o644)
	}
	r.MaxShown = 30
	return r
}

// ungated returns the ops of ungated identities.
func ungated(ops []Op) []Op {
	var out []Op
	for _, op := range ops {
		if !op.Gated {
			out = append(out, op)
		}
	}
	return out
}
