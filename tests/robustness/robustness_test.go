package robustness

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/dockertest"
	"github.com/carmyhq/carmy/tests/testutil"
)

// Environment of the robustness test.
const (
	// envMode is "short" (the default: seed 1 at 3 and 5 nodes, about two
	// minutes),
	// "long" (3 nodes for 120 s and 5 nodes for 150 s, 10 seeds each) or
	// "off".
	envMode = "CARMY_ROBUSTNESS"
	// envSeeds overrides the seeds: a count ("20": seeds 1…20) or a list
	// ("3,7").
	envSeeds = "CARMY_ROBUSTNESS_SEEDS"
	// envOut is where reports and visualisations go (default
	// $TMPDIR/carmy-robustness).
	envOut = "CARMY_ROBUSTNESS_OUT"
	// envRequireDocker makes a missing Docker engine a failure; CI sets
	// it (as does a set $CI).
	envRequireDocker = "CARMY_REQUIRE_DOCKER"
)

// schedule is one cluster size's share of a mode.
type schedule struct {
	nodes, clients int
	duration       time.Duration
	seeds          []uint64
	hold           [2]time.Duration
}

func schedules(t *testing.T) []schedule {
	mode := os.Getenv(envMode)
	var out []schedule
	switch mode {
	case "", "short":
		out = []schedule{
			{nodes: 3, clients: 6, duration: 30 * time.Second, seeds: []uint64{1}, hold: [2]time.Duration{2 * time.Second, 4 * time.Second}},
			{nodes: 5, clients: 8, duration: 35 * time.Second, seeds: []uint64{1}, hold: [2]time.Duration{2 * time.Second, 4 * time.Second}},
		}
	case "long":
		out = []schedule{
			{nodes: 3, clients: 6, duration: 120 * time.Second, seeds: seedRange(10), hold: [2]time.Duration{3 * time.Second, 15 * time.Second}},
			{nodes: 5, clients: 8, duration: 150 * time.Second, seeds: seedRange(10), hold: [2]time.Duration{3 * time.Second, 15 * time.Second}},
		}
	case "off":
		t.Skipf("%s=off", envMode)
	default:
		t.Fatalf("%s=%q: want short, long or off", envMode, mode)
	}
	return withSeeds(t, out)
}

// fleetSchedules are the runs of a fleet on PostgreSQL of the mode: short,
// 3 nodes for 30 s with seed 1 (about 80 s once the images are built);
// long, 3 nodes for 120 s with seeds 1 to 10.
func fleetSchedules(t *testing.T) []schedule {
	var out []schedule
	switch mode := os.Getenv(envMode); mode {
	case "", "short":
		out = []schedule{{nodes: 3, clients: 6, duration: 30 * time.Second, seeds: []uint64{1}, hold: [2]time.Duration{2 * time.Second, 4 * time.Second}}}
	case "long":
		out = []schedule{{nodes: 3, clients: 6, duration: 120 * time.Second, seeds: seedRange(10), hold: [2]time.Duration{3 * time.Second, 15 * time.Second}}}
	case "off":
		t.Skipf("%s=off", envMode)
	default:
		t.Fatalf("%s=%q: want short, long or off", envMode, mode)
	}
	return withSeeds(t, out)
}

// withSeeds gives every schedule the seeds of $CARMY_ROBUSTNESS_SEEDS,
// when set.
func withSeeds(t *testing.T, out []schedule) []schedule {
	if s := os.Getenv(envSeeds); s != "" {
		seeds, err := parseSeeds(s)
		if err != nil {
			t.Fatalf("%s: %v", envSeeds, err)
		}
		for i := range out {
			out[i].seeds = seeds
		}
	}
	return out
}

// requireDocker skips t, loudly, when no Docker engine answers, and fails
// it instead in CI. CARMY_ROBUSTNESS=off skips it quietly.
func requireDocker(t *testing.T) {
	t.Helper()
	if os.Getenv(envMode) == "off" {
		t.Skipf("%s=off", envMode)
	}
	if err := dockertest.Available(); err != nil {
		if os.Getenv(envRequireDocker) == "1" || os.Getenv("CI") != "" {
			t.Fatalf("ROBUSTNESS TEST CANNOT RUN: no Docker engine answers, and this is CI (%s or CI is set): %v", envRequireDocker, err)
		}
		testutil.SkipLoudly(t, "!!! ROBUSTNESS TEST SKIPPED: no Docker engine answers: %v; the fault-injection harness needs Docker (CARMY_ROBUSTNESS=off silences this)", err)
	}
}

func seedRange(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

func parseSeeds(s string) ([]uint64, error) {
	if !strings.Contains(s, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want a count or a comma-separated list", s)
		}
		return seedRange(n), nil
	}
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seed %q: %w", f, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// TestRobustness runs the fault-injection harness: for each cluster size
// and seed, a cluster of containers, concurrent agents retrying calls of
// the ledger tool on random nodes, and a nemesis killing, pausing,
// partitioning and re-membering nodes; then it checks at most once
// (ledger), replays, convergence, no execution left running, and the
// linearizability of every identity's history (porcupine). Any anomaly
// fails the run. See doc.go for the modes.
//
// It runs beside TestRobustnessPostgres (t.Parallel): each run has
// containers, networks and a report directory of its own, and the
// checks hold whatever the machine's load.
func TestRobustness(t *testing.T) {
	testutil.LongTier(t, "the fault-injection harness")
	t.Parallel()
	plan := schedules(t)
	requireDocker(t)
	runSchedules(t, storeRaft, plan)
}

// TestRobustnessPostgres runs the fault-injection harness on a fleet
// (docs/operations.md#a-fleet-on-postgresql): for each seed, a PostgreSQL container and stateless nodes
// sharing it, the same agents, and a nemesis stopping, killing, pausing
// the database and ending its connections, and killing, pausing and
// isolating nodes; then the same checks as TestRobustness but
// convergence (there are no replicas). Any anomaly fails the run.
func TestRobustnessPostgres(t *testing.T) {
	testutil.LongTier(t, "the fault-injection harness on PostgreSQL")
	t.Parallel()
	plan := fleetSchedules(t)
	requireDocker(t)
	runSchedules(t, storePostgres, plan)
}

// runSchedules runs plan's seeds on store, one subtest each, and writes a
// summary of their reports.
func runSchedules(t *testing.T, store string, plan []schedule) {
	out := os.Getenv(envOut)
	if out == "" {
		out = filepath.Join(os.TempDir(), "carmy-robustness")
	}
	var summary strings.Builder
	for _, s := range plan {
		for _, seed := range s.seeds {
			t.Run(fmt.Sprintf("nodes=%d/seed=%d", s.nodes, seed), func(t *testing.T) {
				r := run(t, runConfig{Store: store, Nodes: s.nodes, Clients: s.clients, Seed: seed, Duration: s.duration, Hold: s.hold, OutDir: out})
				t.Log("\n" + r.String())
				summary.WriteString(r.String())
				if len(r.Anomalies) > 0 {
					t.Errorf("%d anomalies (report and visualisations under %s)", len(r.Anomalies), out)
				}
			})
		}
	}
	if err := os.MkdirAll(out, 0o755); err == nil {
		name := "summary.txt"
		if store == storePostgres {
			name = "summary-postgres.txt"
		}
		_ = os.WriteFile(filepath.Join(out, name), []byte(summary.String()), 0o644)
	}
	t.Logf("reports under %s", out)
}
