package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/store"
)

// currentTerm returns Raft's current term.
func (n *Node) currentTerm() uint64 { return n.raft.CurrentTerm() }

// leaderReadIndex returns an index a linearizable read must wait for: this
// node's applied index, after confirming that it still leads and that it
// has applied everything committed before its term (its barrier).
func (n *Node) leaderReadIndex(context.Context) (uint64, error) {
	if !n.IsLeader() {
		return 0, peer.ErrNotLeader
	}
	if ready := n.leaderReady.Load(); ready == 0 || ready != n.currentTerm() {
		return 0, fmt.Errorf("%w: the new leader has not caught up yet", peer.ErrNotLeader)
	}
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return 0, peer.ErrNotLeader
	}
	// Every write acknowledged before this read was applied here first
	// (the barrier covers earlier terms), so this FSM's index bounds them.
	// The FSM's index, not Raft's commit index: Raft keeps no-op and
	// barrier entries from the FSM, so an FSM never reaches an index that
	// is one of those.
	return n.fsm.AppliedIndex(), nil
}

// ReadBarrier waits until this node's state reflects every write committed
// before the call: the leader's read index, applied here. Reads that
// follow it are linearizable. It fails with store.ErrUnavailable when no
// leader answers within LeaderWait.
func (n *Node) ReadBarrier(ctx context.Context) error {
	var idx uint64
	var until time.Time
	err := n.untilLeader(ctx, "no leader confirmed a read", func(deadline time.Time) error {
		var err error
		idx, err = n.readIndex(ctx, deadline)
		until = deadline
		return err
	})
	if err != nil {
		return err
	}
	return n.waitApplied(ctx, idx, until)
}

func (n *Node) readIndex(ctx context.Context, deadline time.Time) (uint64, error) {
	if n.IsLeader() {
		return n.leaderReadIndex(ctx)
	}
	leader, ok := n.leaderHTTP()
	if !ok {
		return 0, peer.ErrNotSent
	}
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return n.client.ReadIndex(rctx, leader)
}

func (n *Node) waitApplied(ctx context.Context, idx uint64, deadline time.Time) error {
	select {
	case <-n.fsm.WaitApplied(idx):
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	case <-time.After(time.Until(deadline)):
		return fmt.Errorf("%w: this node did not catch up to index %d in time", store.ErrUnavailable, idx)
	case <-n.stop:
		return fmt.Errorf("%w: the node is shutting down", store.ErrUnavailable)
	}
}

// Ready returns nil when the node knows a leader (and where to forward to
// it), has applied the log up to what it knows committed (docs/api.md#health
// /readyz), and is a member of the Raft configuration: a removed node that
// still runs is not ready. Nor is a leader whose log waits for disk space
// (it refuses new calls).
func (n *Node) Ready(context.Context) error {
	if n.logs.QueueStalled() {
		_, err := n.logs.Stalled()
		return fmt.Errorf("%w: the disk is full: this node's raft log cannot be written, and it refuses new calls (%v)", store.ErrUnavailable, err)
	}
	if id, addr := n.Leader(); id == "" {
		return fmt.Errorf("%w: no known leader", store.ErrUnavailable)
	} else if addr == "" {
		return fmt.Errorf("%w: the leader's address is not known yet", store.ErrUnavailable)
	}
	if applied, commit := n.raft.AppliedIndex(), n.raft.CommitIndex(); applied < commit {
		return fmt.Errorf("%w: applied %d of %d committed entries", store.ErrUnavailable, applied, commit)
	}
	if !n.fsm.CapacitySet() {
		return fmt.Errorf("%w: the leader has not set the cluster's capacity yet", store.ErrUnavailable)
	}
	if _, member := n.isVoter(n.cfg.NodeID); !member {
		// Removed (or never added): it may still know the last leader
		// and hold an applied log, but it takes no part in commits and
		// hears of none, so what it would serve goes stale.
		return fmt.Errorf("%w: this node is not a member of the cluster's configuration (removed?); add it again with POST /v1/cluster/nodes", store.ErrUnavailable)
	}
	return nil
}
