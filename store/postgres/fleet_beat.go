package postgres

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// fleetQueries are a Fleet's statements on the nodes table.
type fleetQueries struct {
	beat, sweep, peers, prune, nodes, cancelledSince string
}

func newFleetQueries(n names) fleetQueries {
	x := n.expand
	return fleetQueries{
		// $1 node id, $2 HTTP address, $3 version, $4 incarnation,
		// $5 lease (µs). Returns the incarnation that beat before this
		// one and whether its lease still held: another process beating
		// with this node id shows as a live incarnation not ours.
		beat: x(`WITH old AS (
	SELECT incarnation, beat_at + lease_us * interval '1 microsecond' > clock_timestamp() AS live
	FROM {nodes} WHERE node_id = $1
), up AS (
	INSERT INTO {nodes} AS n (node_id, http_addr, version, incarnation, started_at, beat_at, lease_us)
	VALUES ($1, $2, $3, $4, clock_timestamp(), clock_timestamp(), $5)
	ON CONFLICT (node_id) DO UPDATE SET http_addr = EXCLUDED.http_addr, version = EXCLUDED.version,
		started_at = CASE WHEN n.incarnation = EXCLUDED.incarnation THEN n.started_at ELSE EXCLUDED.started_at END,
		incarnation = EXCLUDED.incarnation, beat_at = EXCLUDED.beat_at, lease_us = EXCLUDED.lease_us
	RETURNING 1
)
SELECT (SELECT incarnation FROM old), coalesce((SELECT live FROM old), false) FROM up`),
		// Every running execution of a node silent past its own lease
		// becomes interrupted; the records marked.
		sweep: x(`UPDATE {records} AS r SET status = 'interrupted'
	FROM {nodes} AS n
	WHERE r.status = 'running' AND r.node_id = n.node_id
		AND n.beat_at + n.lease_us * interval '1 microsecond' < clock_timestamp()
	RETURNING ` + qualified("r", recordColumns)),
		peers: x(`SELECT node_id, beat_at + lease_us * interval '1 microsecond' >= clock_timestamp() FROM {nodes}`),
		// A node dead for a day, with nothing running, is forgotten.
		prune: x(`DELETE FROM {nodes} AS n WHERE n.beat_at < clock_timestamp() - interval '1 day'
	AND NOT EXISTS (SELECT 1 FROM {records} AS r WHERE r.status = 'running' AND r.node_id = n.node_id)`),
		nodes: x(`SELECT node_id, http_addr, version, started_at, beat_at, lease_us,
	beat_at + lease_us * interval '1 microsecond' >= clock_timestamp()
FROM {nodes} ORDER BY node_id`),
		// $1 node id, $2 since.
		cancelledSince: x(`SELECT execution_id FROM {records}
WHERE finished_at >= $2 AND status = 'cancelled' AND node_id = $1`),
	}
}

// beatTimeout bounds one heartbeat.
func (f *Fleet) beatTimeout() time.Duration { return min(f.cfg.Lease/4, 2*time.Second) }

// beatLoop beats every Lease/4 while beats succeed, every 500 ms while
// they fail (so that the node serves again soon after the database is
// back), until ctx ends.
func (f *Fleet) beatLoop(ctx context.Context) {
	for {
		f.mu.Lock()
		failing := f.beatErr != nil
		f.mu.Unlock()
		wait := f.cfg.Lease / 4
		if failing {
			wait = min(wait, 500*time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		f.beatOnce(ctx, false)
	}
}

// beatOnce writes this node's heartbeat and records how it went, logging
// when the database becomes unreachable and when it is back.
func (f *Fleet) beatOnce(ctx context.Context, first bool) {
	s := f.st.Load()
	sent := time.Now()
	bctx, cancel := context.WithTimeout(ctx, f.beatTimeout())
	var (
		prev *string
		live bool
	)
	err := f.pool.QueryRow(bctx, s.fq.beat, f.cfg.NodeID, f.cfg.HTTPAddr, f.cfg.Version, f.incarnation,
		f.cfg.Lease.Microseconds()).Scan(&prev, &live)
	cancel()
	if ctx.Err() != nil {
		return
	}
	f.mu.Lock()
	wasFailing := f.beatErr != nil
	if err == nil {
		f.lastGood, f.beatErr = sent, nil
	} else {
		f.beatErr = err
	}
	f.mu.Unlock()
	switch {
	case err != nil && !wasFailing:
		f.log.Warn("the database is unreachable: calls are refused until it is back", slog.Any("err", err))
	case err == nil && wasFailing:
		f.log.Info("the database is reachable again: taking calls")
	}
	if err == nil && prev != nil && *prev != f.incarnation && live {
		if first {
			f.log.Warn("another process beat with this node id within its lease: a previous run of this node, or a second node given the same --node-id",
				slog.String("node_id", f.cfg.NodeID))
		} else {
			f.log.Error("another process beats with this node id: every node of a fleet needs its own --node-id",
				slog.String("node_id", f.cfg.NodeID))
		}
	}
}

// sweepLoop, every Lease/2, marks the running executions of dead nodes
// interrupted, refreshes the view of who is alive, forgets nodes long
// dead, and applies the retention, until ctx ends.
func (f *Fleet) sweepLoop(ctx context.Context) {
	var lastExpire time.Time
	expireEvery := min(max(f.cfg.Retention/10, time.Second), time.Minute)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(f.cfg.Lease / 2):
		}
		f.sweepOnce(ctx)
		if f.cfg.Retention > 0 && time.Since(lastExpire) >= expireEvery {
			lastExpire = time.Now()
			f.expireOnce(ctx)
		}
	}
}

// sweepOnce marks the dead nodes' running executions interrupted and
// refreshes the peers.
func (f *Fleet) sweepOnce(ctx context.Context) {
	s := f.st.Load()
	sctx, cancel := context.WithTimeout(ctx, f.cfg.Lease/2)
	defer cancel()
	recs, err := s.interrupt(sctx, "sweep", f.cfg.NodeID, s.fq.sweep)
	if err != nil {
		f.log.Debug("sweep: the database did not answer", slog.Any("err", err))
		return
	}
	dead := map[string]int{}
	for _, r := range recs {
		dead[r.NodeID]++
	}
	for _, node := range slices.Sorted(maps.Keys(dead)) {
		f.log.Warn("a node is silent past its lease: its running executions are now interrupted",
			slog.String("dead_node", node), slog.Int("count", dead[node]))
	}
	var node string
	peers := map[string]bool{}
	rows, err := f.pool.Query(sctx, s.fq.peers)
	if err == nil {
		var alive bool
		_, err = pgx.ForEachRow(rows, []any{&node, &alive}, func() error {
			peers[node] = alive
			return nil
		})
	}
	if err != nil {
		return
	}
	f.mu.Lock()
	f.peers = peers
	f.mu.Unlock()
	if _, err := f.pool.Exec(sctx, s.fq.prune); err != nil {
		f.log.Debug("sweep: forgetting long-dead nodes", slog.Any("err", err))
	}
}

// expireOnce removes the finished records past the retention.
func (f *Fleet) expireOnce(ctx context.Context) {
	s := f.st.Load()
	ectx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := s.Expire(ectx, time.Now().UTC().Add(-f.cfg.Retention))
	switch {
	case err != nil:
		f.log.Warn("retention: removing finished records", slog.Any("err", err))
	case n > 0:
		f.log.Info("retention: removed finished records", slog.Int("count", n), slog.Duration("retention", f.cfg.Retention))
	}
}

// qualified is columns (a comma-separated list) each qualified by alias.
func qualified(alias, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}
