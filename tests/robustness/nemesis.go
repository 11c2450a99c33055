package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// The faults the nemesis injects.
const (
	faultKillLeader      = "kill-leader"
	faultKillFollower    = "kill-follower"
	faultKillAll         = "kill-all"
	faultPauseLeader     = "pause-leader"
	faultPauseFollower   = "pause-follower"
	faultIsolateLeader   = "isolate-leader"   // docker network disconnect
	faultIsolateFollower = "isolate-follower" // docker network disconnect
	faultOneWay          = "one-way-drop"     // the leader cannot reach a follower (fault layer)
	faultSplitMinority   = "split-leader-minority"
	faultBridge          = "bridge"
	faultRemoveKept      = "remove-readd-kept"
	faultRemoveWiped     = "remove-readd-wiped"
	// faultCPUContention and faultLargeResults: overload.go;
	// faultDiskFullLeader and faultDiskFullFollower: diskfull.go.
)

// allFaults lists every fault kind.
var allFaults = []string{
	faultKillLeader, faultKillFollower, faultKillAll, faultPauseLeader, faultPauseFollower,
	faultIsolateLeader, faultIsolateFollower, faultOneWay, faultSplitMinority, faultBridge,
	faultRemoveKept, faultRemoveWiped, faultCPUContention, faultLargeResults,
	faultDiskFullLeader, faultDiskFullFollower,
}

// deposes lists the faults that cut the leader off from a majority: while
// they last, the majority must elect another leader.
var deposes = map[string]bool{
	faultKillLeader: true, faultPauseLeader: true, faultIsolateLeader: true, faultSplitMinority: true,
}

// electTimeout bounds how long a majority cut off from its leader may take
// to elect another one.
const electTimeout = 30 * time.Second

// recoverTimeout bounds how long the cluster may take to become healthy
// after a fault heals (calibrated for 2 cores running every container).
const recoverTimeout = 90 * time.Second

// faultEvent is one injected fault.
type faultEvent struct {
	Kind    string
	Targets []string
	At      time.Duration // since the workload started
	Healed  time.Duration
	Whole   time.Duration // when the cluster was whole again (0: not within recoverTimeout)
	Effect  string        // what the fault was seen to do
	Err     string        // what went wrong injecting or healing it
}

// nemesis injects faults one at a time: a quiet spell, a fault held for a
// while, its heal, and a wait until the cluster is healthy again.
type nemesis struct {
	c     *testCluster
	rng   *rand.Rand
	start time.Time
	hold  [2]time.Duration // a fault lasts between these

	// faults are the kinds it injects: allFaults, or fleetFaults for a
	// fleet on PostgreSQL.
	faults []string

	mu        sync.Mutex
	events    []faultEvent
	anomalies []string
	effect    string // what the heal of the current fault saw it do, if anything
}

func newNemesis(c *testCluster, seed uint64, start time.Time) *nemesis {
	faults := allFaults
	if c.fleet != nil {
		faults = fleetFaults
	}
	return &nemesis{c: c, rng: rand.New(rand.NewPCG(seed, 0x6e656d)), start: start, hold: [2]time.Duration{3 * time.Second, 8 * time.Second}, faults: faults}
}

// run injects faults, every kind once in a random order and then again,
// until ctx ends. A fault injected is always healed, and run returns only
// once the cluster is healthy again (or recoverTimeout passed, an anomaly).
func (nm *nemesis) run(ctx context.Context) {
	order := slices.Clone(nm.faults)
	nm.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for i := 0; ; i++ {
		if !sleep(ctx, nm.between(1*time.Second, 3*time.Second)) {
			return
		}
		nm.once(ctx, order[i%len(order)])
	}
}

func (nm *nemesis) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(nm.rng.Int64N(int64(hi-lo)+1))
}

// once injects one fault, holds it, heals it and waits for recovery.
func (nm *nemesis) once(ctx context.Context, kind string) {
	ev := faultEvent{Kind: kind, At: time.Since(nm.start)}
	before := nm.c.leader()
	inject := nm.inject
	if nm.c.fleet != nil {
		inject = nm.injectFleet
	}
	heal, targets, err := inject(kind)
	ev.Targets = targets
	if err != nil {
		ev.Err = "inject: " + err.Error()
	}
	if heal != nil {
		// Hold the fault even when the run is ending: the workload's last
		// calls see it, and heal always runs.
		t := time.NewTimer(nm.between(nm.hold[0], nm.hold[1]))
		if err == nil && deposes[kind] {
			// The fault must bite: the nodes on the majority side elect
			// another leader (and the fault lasts at least until then).
			ev.Effect = nm.awaitNewLeader(targets[0], without(nm.c.names, targets))
		}
		if err == nil && nm.c.fleet != nil {
			// The fault must bite as for a leader above.
			ev.Effect = nm.biteFleet(kind, targets)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		if err := heal(); err != nil {
			ev.Err += " heal: " + err.Error()
		}
		nm.mu.Lock()
		if nm.effect != "" {
			ev.Effect = strings.TrimPrefix(ev.Effect+"; "+nm.effect, "; ")
			nm.effect = ""
		}
		nm.mu.Unlock()
		if loadFaults[kind] {
			if after := nm.c.leader(); after == before {
				ev.Effect = "leader kept: " + before
			} else {
				ev.Effect = fmt.Sprintf("leader changed under load alone: %s -> %s", before, after)
			}
		}
	}
	ev.Healed = time.Since(nm.start)
	if _, err := nm.c.waitHealthy(context.Background(), recoverTimeout); err == nil {
		ev.Whole = time.Since(nm.start)
	} else {
		nm.anomaly(fmt.Sprintf("no recovery within %s after %s of %v: %v\n%s", recoverTimeout, kind, targets, err, nm.c.describe()))
	}
	nm.mu.Lock()
	nm.events = append(nm.events, ev)
	nm.mu.Unlock()
}

// awaitNewLeader waits until every node of majority names the same leader,
// one of them and not old, and says who and when; when none is elected
// within electTimeout, that is an anomaly (the fault did not bite, or the
// majority could not elect).
func (nm *nemesis) awaitNewLeader(old string, majority []string) string {
	start := time.Now()
	leader, err := nm.c.waitAgreed(context.Background(), electTimeout, majority, testutil.Agreement{NotLeader: old})
	if err != nil {
		nm.anomaly(fmt.Sprintf("cut off leader %s: the majority %v elected no other leader: %v\n%s", old, majority, err, nm.c.describe()))
		return "no new leader"
	}
	return fmt.Sprintf("%s elected after %.1fs", leader, time.Since(start).Seconds())
}

func (nm *nemesis) anomaly(s string) {
	nm.mu.Lock()
	nm.anomalies = append(nm.anomalies, s)
	nm.mu.Unlock()
}

// roles returns the current leader and the other nodes, shuffled.
func (nm *nemesis) roles() (leader string, followers []string) {
	leader = nm.c.leader()
	for _, name := range nm.c.names {
		if name != leader {
			followers = append(followers, name)
		}
	}
	nm.rng.Shuffle(len(followers), func(i, j int) { followers[i], followers[j] = followers[j], followers[i] })
	if leader == "" { // none known: any node will do
		leader, followers = followers[0], followers[1:]
	}
	return leader, followers
}

// inject starts a fault and returns how to heal it and whom it hit.
func (nm *nemesis) inject(kind string) (heal func() error, targets []string, err error) {
	leader, followers := nm.roles()
	c := nm.c
	switch kind {
	case faultKillLeader, faultKillFollower:
		target := leader
		if kind == faultKillFollower {
			target = followers[0]
		}
		n := c.node(target)
		return n.Start, []string{target}, n.Kill()
	case faultKillAll:
		err := each(c.names, func(name string) error { return c.node(name).Kill() })
		return func() error { return each(c.names, func(name string) error { return c.node(name).Start() }) }, c.names, err
	case faultPauseLeader, faultPauseFollower:
		target := leader
		if kind == faultPauseFollower {
			target = followers[0]
		}
		n := c.node(target)
		return n.Unpause, []string{target}, n.Pause()
	case faultIsolateLeader, faultIsolateFollower:
		target := leader
		if kind == faultIsolateFollower {
			target = followers[0]
		}
		n := c.node(target)
		return n.Connect, []string{target}, n.Disconnect()
	case faultOneWay:
		// The leader can no longer open connections to one follower (nor
		// send it gossip packets); the follower still reaches the leader.
		blocked := [][2]string{{leader, followers[0]}}
		return c.healLinks, []string{leader + "->" + followers[0]}, c.cutLinks(blocked)
	case faultSplitMinority:
		minority := []string{leader}
		if len(c.names) >= 5 {
			minority = append(minority, followers[0])
		}
		majority := without(c.names, minority)
		return c.healLinks, minority, c.cutLinks(both(minority, majority))
	case faultBridge:
		// Two halves that reach each other only through the bridge node.
		order := append([]string{leader}, followers...)
		nm.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		half := (len(order) - 1) / 2
		a, bridge, b := order[:half], order[half], order[half+1:]
		return c.healLinks, []string{fmt.Sprintf("%v|%s|%v", a, bridge, b)}, c.cutLinks(both(a, b))
	case faultRemoveKept, faultRemoveWiped:
		target := followers[0]
		if nm.rng.IntN(3) == 0 {
			target = leader
		}
		wipe := kind == faultRemoveWiped
		member, err := c.removeMember(target, wipe)
		if err != nil {
			return nil, []string{target}, err
		}
		return func() error { return c.readd(target, member, wipe) }, []string{target}, nil
	case faultCPUContention:
		return nm.injectContention()
	case faultLargeResults:
		return nm.injectLargeResults(followers[0])
	case faultDiskFullLeader:
		return nm.injectDiskFull(leader)
	case faultDiskFullFollower:
		return nm.injectDiskFull(followers[0])
	}
	return nil, nil, fmt.Errorf("unknown fault %q", kind)
}

// each runs fn for every name at once and returns the first error.
func each(names []string, fn func(string) error) error {
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { errs[i] = fn(name) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// both returns the links between every node of a and every node of b, in
// both directions.
func both(a, b []string) [][2]string {
	var out [][2]string
	for _, x := range a {
		for _, y := range b {
			out = append(out, [2]string{x, y}, [2]string{y, x})
		}
	}
	return out
}

func without(all, drop []string) []string {
	var out []string
	for _, n := range all {
		if !slices.Contains(drop, n) {
			out = append(out, n)
		}
	}
	return out
}
