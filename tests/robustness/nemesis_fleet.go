package robustness

import (
	"context"
	"fmt"
	"time"
)

// The faults of a fleet on PostgreSQL (fleet.go): the database stopped
// (SIGINT, PostgreSQL's fast shutdown) and started again; killed (SIGKILL:
// a crash it recovers from by replaying its WAL) and started again;
// paused (cgroup freezer); the nodes' connections ended by
// pg_terminate_backend, again every half second while the fault lasts;
// and a node killed and restarted, paused, or cut off the network (from
// the database and the ledger alike) with `docker network disconnect`.
const (
	faultDBStop      = "db-stop"
	faultDBKill      = "db-kill"
	faultDBPause     = "db-pause"
	faultDBConnKill  = "db-kill-connections"
	faultNodeKill    = "node-kill"
	faultNodePause   = "node-pause"
	faultNodeIsolate = "node-isolate"
)

// fleetFaults lists every fault kind of a fleet run.
var fleetFaults = []string{
	faultDBStop, faultDBKill, faultDBPause, faultDBConnKill, faultNodeKill, faultNodePause, faultNodeIsolate,
}

// dbStopTimeout is how long a stopped database may take to shut down
// before Docker kills it.
const dbStopTimeout = 30 * time.Second

// injectFleet starts a fault of a fleet and returns how to heal it and
// whom it hit.
func (nm *nemesis) injectFleet(kind string) (heal func() error, targets []string, err error) {
	c := nm.c
	db := c.fleet.c
	target := c.names[nm.rng.IntN(len(c.names))]
	n := c.node(target)
	switch kind {
	case faultDBStop:
		return nm.startDB, []string{dbName}, db.Stop(dbStopTimeout)
	case faultDBKill:
		return nm.startDB, []string{dbName}, db.Kill()
	case faultDBPause:
		return db.Unpause, []string{dbName}, db.Pause()
	case faultDBConnKill:
		return nm.killConnections()
	case faultNodeKill:
		return n.Start, []string{target}, n.Kill()
	case faultNodePause:
		return n.Unpause, []string{target}, n.Pause()
	case faultNodeIsolate:
		return n.Connect, []string{target}, n.Disconnect()
	}
	return nil, nil, fmt.Errorf("unknown fault %q", kind)
}

// startDB starts the database again and notes how long it took to
// answer (after a kill, its recovery from the WAL included: it fsyncs its
// data directory first, which on a loaded host takes tens of seconds, so
// a database that runs but has not answered within Start's minute gets
// recoverTimeout more; the contract bounds the nodes' return once it
// answers, not its own).
func (nm *nemesis) startDB() error {
	start := time.Now()
	db := nm.c.fleet
	err := db.c.Start()
	if err != nil && db.c.Running() && db.c.HostAddr() != "" {
		deadline := time.Now().Add(recoverTimeout)
		for err != nil && time.Now().Before(deadline) {
			if err = db.reachable(context.Background()); err != nil {
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	nm.mu.Lock()
	nm.effect = fmt.Sprintf("answering %.1fs after its start", time.Since(start).Seconds())
	nm.mu.Unlock()
	return err
}

// killConnections ends the nodes' database connections now and every
// 500 ms until healed (the harness's own connection is spared); the heal
// says how many it ended. Only the first round must succeed: a later one
// that fails (the harness's connection too slow on a loaded host) is
// counted in the effect.
func (nm *nemesis) killConnections() (heal func() error, targets []string, err error) {
	tm := &terminator{db: nm.c.fleet}
	ended, err := tm.terminate(context.Background())
	if err != nil {
		tm.close()
		return nil, []string{dbName}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	rounds, failed := 1, 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer tm.close()
		for sleep(ctx, 500*time.Millisecond) {
			n, err := tm.terminate(ctx)
			rounds++
			ended += n
			if err != nil && ctx.Err() == nil {
				failed++
			}
		}
	}()
	return func() error {
		cancel()
		<-done
		nm.mu.Lock()
		nm.effect = fmt.Sprintf("%d connections ended in %d rounds (%d rounds failed)", ended, rounds, failed)
		nm.mu.Unlock()
		return nil
	}, []string{dbName}, nil
}

// biteFleet waits until fault kind, injected on targets, is seen to act,
// and says how: a silent node is declared dead by the others, which then
// mark its running executions interrupted; with the database down every
// node refuses to be ready.
func (nm *nemesis) biteFleet(kind string, targets []string) string {
	switch kind {
	case faultNodePause, faultNodeIsolate:
		others := without(nm.c.names, targets)
		dead := nm.awaitDeclaredDead(targets[0], others)
		return dead + "; " + nm.awaitMarked(targets[0], others)
	case faultDBStop, faultDBKill, faultDBPause:
		return nm.awaitRefusing()
	}
	return ""
}
