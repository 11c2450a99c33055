package cluster

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// A full disk (docs/operations.md#a-full-disk). When the leader's queued log write fails for want
// of space, raftlog.QueuedLog retries it until there is room; meanwhile this node:
//   - refuses new calls (a reservation, locally or forwarded) with
//     UNAVAILABLE before anything is reserved, so no tool runs that could
//     not be recorded (refuseOnFullDisk); every other command (a
//     completion, a cancel) waits in the queue for room instead;
//   - answers a reservation proposed before the log stalled, whose entry
//     may be the very write that failed, with store.ErrCommitUnknown the
//     moment it stalls (awaitProposal), not at its deadline: its tool has
//     not run, and the runtime that proposed it releases it should it
//     commit after all;
//   - hands its leadership to another voter, so that the cluster takes
//     writes on the others (watchDiskFull); a single voter keeps leading
//     and takes writes again as soon as the write goes through;
//   - reports it: a log line when it starts and ends, the gauge
//     carmy_raft_log_disk_full, the refusals in
//     carmy_raft_log_disk_full_refusals_total, and /readyz.
//
// A follower whose disk is full fails the appends its leader sends (the
// leader sends them again, with a backoff) and forwards its calls to the
// leader as ever: they are written by the leader and the other followers.

// refuseOnFullDisk returns an UNAVAILABLE error when a command of type t
// must not be proposed by this node because its log waits for disk space:
// a reservation, which would let a tool run that could not be recorded.
func (n *Node) refuseOnFullDisk(t fsm.Type) error {
	if t != fsm.TypeReserve || !n.logs.QueueStalled() {
		return nil
	}
	since, err := n.logs.Stalled()
	if err == nil {
		return nil
	}
	n.metrics.diskFullRefusals.Inc()
	return fmt.Errorf("%w: the disk of node %s is full (for %s): its raft log cannot be written, so the call was not reserved and its tool did not run; retry later (%v)",
		store.ErrUnavailable, n.cfg.NodeID, time.Since(since).Round(time.Millisecond), err)
}

// refuseForwardedOnFullDisk is refuseOnFullDisk for a forwarded command,
// known only by its encoding.
func (n *Node) refuseForwardedOnFullDisk(raw []byte) error {
	if !n.logs.QueueStalled() {
		return nil
	}
	t, ok := fsm.PeekType(raw)
	if !ok {
		return nil
	}
	return n.refuseOnFullDisk(t)
}

// diskFullHandOffEvery is how often a leader whose log waits for disk
// space tries to hand its leadership over, while it does.
const diskFullHandOffEvery = time.Second

// watchDiskFull logs each time the log stalls on a full disk and writes
// again, and while the leader's log is stalled, hands leadership over
// (HandOff) every diskFullHandOffEvery until it no longer leads or the
// log writes again.
func (n *Node) watchDiskFull() {
	tick := time.NewTicker(diskFullHandOffEvery)
	defer tick.Stop()
	var was error
	var wasSince time.Time
	for {
		select {
		case <-n.stop:
			return
		case <-n.logs.Changed():
		case <-tick.C:
		}
		since, err := n.logs.Stalled()
		switch {
		case err != nil && was == nil:
			n.log.Error("the raft log cannot be written: the disk is full; this node refuses new calls (503) and retries until there is room; free space in the data dir",
				slog.String("data_dir", n.cfg.DataDir), slog.Bool("leader", n.IsLeader()), slog.Any("err", err))
		case err == nil && was != nil:
			n.log.Info("the raft log is written again: the disk has room", slog.Duration("full_for", time.Since(wasSince).Round(time.Millisecond)))
			n.reserve.Ensure()
		}
		was, wasSince = err, since
		if err != nil && n.logs.QueueStalled() && n.IsLeader() && n.voters() > 1 {
			n.log.Warn("handing leadership over: this leader cannot write its raft log")
			n.HandOff()
		}
	}
}

// diskFullCollectors are the metrics of a full disk.
func (n *Node) diskFullCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_raft_log_disk_full",
			Help: "1 while this node's Raft log cannot be written for want of disk space (ENOSPC, EDQUOT): on the leader, new calls are refused with 503 until there is room; 0 otherwise.",
		}, func() float64 {
			if _, err := n.logs.Stalled(); err != nil {
				return 1
			}
			return 0
		}),
		n.metrics.diskFullRefusals,
	}
}
