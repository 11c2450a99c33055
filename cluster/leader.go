package cluster

import (
	"context"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store/audit"
)

// leaderDuties runs on every node and acts while it leads: after each
// election it waits for its barrier (so it serves nothing older than what
// was committed before), sets the cluster-wide capacity, then, every tick,
// marks the running executions of members gossip has seen dead for
// DeadGrace interrupted, and those of nodes no longer members
// (interruptStrays), and expires finished records past Retention.
func (n *Node) leaderDuties() {
	tick := 100 * time.Millisecond
	var (
		wasLeader    bool
		unseenSince  = make(map[string]time.Time)
		handled      = make(map[string]time.Time)
		strays       = make(map[string]time.Time)
		lastStrays   time.Time
		lastExpire   time.Time
		lastPrune    time.Time
		lastSign     time.Time
		lastLiveness time.Time
		expireEvery  = min(max(n.cfg.Retention/10, time.Second), time.Minute)
		livenessTick = min(n.cfg.DeadGrace/4, time.Second)
	)
	for n.sleep(tick) {
		if !n.IsLeader() {
			if wasLeader {
				n.leaderReady.Store(0)
				clear(unseenSince)
				clear(handled)
				clear(strays)
			}
			wasLeader = false
			continue
		}
		if !wasLeader || n.leaderReady.Load() != n.currentTerm() {
			if !n.becomeReady() {
				continue
			}
			wasLeader = true
		}
		if time.Since(lastLiveness) >= livenessTick {
			lastLiveness = time.Now()
			n.interruptDead(unseenSince, handled)
		}
		if time.Since(lastStrays) >= strayTick(n.cfg.DeadGrace) {
			lastStrays = time.Now()
			n.interruptStrays(strays)
		}
		if n.cfg.Retention > 0 && time.Since(lastExpire) >= expireEvery {
			lastExpire = time.Now()
			n.expire()
		}
		if n.cfg.AuditRetention > 0 && time.Since(lastPrune) >= time.Minute {
			lastPrune = time.Now()
			n.pruneAudit()
		}
		if n.cfg.AuditSigningKey != nil && time.Since(lastSign) >= n.auditCheckpointEvery() {
			lastSign = time.Now()
			n.signAudit()
		}
	}
}

// becomeReady runs a new leader's barrier and sets the capacity.
func (n *Node) becomeReady() bool {
	term := n.currentTerm()
	if err := n.raft.Barrier(n.cfg.LeaderWait).Error(); err != nil {
		n.log.Warn("leader barrier failed", slog.Any("err", err))
		return false
	}
	n.leaderReady.Store(term)
	n.log.Info("leading", slog.Uint64("term", term), slog.Uint64("applied_index", n.fsm.AppliedIndex()))
	// The leader's own addresses go into the member table before the
	// capacity, which readiness waits for: a ready node can always find
	// the leader it forwards to.
	if info := n.info(); !n.hasNodeInfo(info) {
		ctx, cancel := context.WithTimeout(n.bgCtx, n.cfg.LeaderWait)
		_, err := n.Apply(ctx, fsm.SetNode(info))
		cancel()
		if err != nil {
			n.log.Warn("registering the leader's addresses failed", slog.Any("err", err))
			return false
		}
	}
	want := n.cfg.MaxEntries
	if want <= 0 {
		want = fsm.DefaultCapacity
	}
	if st := n.fsm.Stats(); !n.fsm.CapacitySet() || st.Capacity != want || st.MaxBytes != n.cfg.MaxBytes {
		ctx, cancel := context.WithTimeout(n.bgCtx, n.cfg.LeaderWait)
		defer cancel()
		if _, err := n.Apply(ctx, fsm.SetLimits(want, n.cfg.MaxBytes)); err != nil {
			n.log.Warn("setting the capacity failed", slog.Any("err", err))
		}
	}
	return true
}

// interruptDead marks interrupted the running executions of voters that
// gossip has not seen alive for DeadGrace, once per death. A death is
// dated by gossip (reset whenever the member comes back), or, for a
// member gossip never saw, from when this leader first missed it.
// handled maps a member to the death already handled.
func (n *Node) interruptDead(unseenSince, handled map[string]time.Time) {
	cfg := n.raft.GetConfiguration()
	if cfg.Error() != nil {
		return
	}
	members := make(map[string]bool)
	for _, s := range cfg.Configuration().Servers {
		id := string(s.ID)
		members[id] = true
		if id == n.cfg.NodeID {
			continue
		}
		state := n.gossipState(id)
		if state == GossipAlive || state == GossipSuspect {
			delete(unseenSince, id)
			delete(handled, id)
			continue
		}
		since, dead := n.members.DiedAt(id)
		if !dead {
			if first, ok := unseenSince[id]; ok {
				since = first
			} else {
				since = time.Now()
				unseenSince[id] = since
			}
		}
		if done, ok := handled[id]; (ok && done.Equal(since)) || time.Since(since) < n.cfg.DeadGrace {
			continue
		}
		ctx, cancel := context.WithTimeout(n.bgCtx, n.cfg.LeaderWait)
		resp, err := n.Apply(ctx, fsm.Interrupt(id))
		cancel()
		if err != nil {
			n.log.Warn("marking a dead node's executions interrupted failed", slog.String("dead_node", id), slog.Any("err", err))
			continue
		}
		handled[id] = since
		n.log.Warn("a node is dead: its running executions are now interrupted",
			slog.String("dead_node", id), slog.Int("interrupted", resp.Count), slog.Duration("dead_for", time.Since(since)))
	}
	for id := range unseenSince {
		if !members[id] {
			delete(unseenSince, id)
		}
	}
	for id := range handled {
		if !members[id] {
			delete(handled, id)
		}
	}
}

// strayTick is how often the leader looks for running executions of nodes
// that are not members: the search visits every record.
func strayTick(deadGrace time.Duration) time.Duration {
	return min(max(deadGrace/2, time.Second), 5*time.Second)
}

// interruptStrays marks interrupted the running executions of nodes that
// are not in the Raft configuration, once this leader has seen them held
// by such a node for DeadGrace. A removal marks the executions the
// removed node holds when it is applied, but the node may go on taking
// calls until it is stopped, and the leader on accepting its
// reservations: those would stay running for ever, since no member's
// death covers them. strays maps such a node to when this leader first
// saw it holding running executions.
func (n *Node) interruptStrays(strays map[string]time.Time) {
	cfg := n.raft.GetConfiguration()
	if cfg.Error() != nil {
		return
	}
	members := make(map[string]bool)
	for _, s := range cfg.Configuration().Servers {
		members[string(s.ID)] = true
	}
	holding := make(map[string]bool)
	for _, id := range n.fsm.RunningNodes() {
		if members[id] || id == n.cfg.NodeID {
			continue
		}
		holding[id] = true
		first, ok := strays[id]
		if !ok {
			strays[id] = time.Now()
			continue
		}
		if time.Since(first) < n.cfg.DeadGrace {
			continue
		}
		ctx, cancel := context.WithTimeout(n.bgCtx, n.cfg.LeaderWait)
		resp, err := n.Apply(ctx, fsm.Interrupt(id))
		cancel()
		if err != nil {
			n.log.Warn("marking a removed node's executions interrupted failed", slog.String("node", id), slog.Any("err", err))
			continue
		}
		n.log.Warn("a node that is not a member holds running executions: they are now interrupted",
			slog.String("node", id), slog.Int("interrupted", resp.Count))
	}
	for id := range strays {
		if !holding[id] {
			delete(strays, id)
		}
	}
}

// expire proposes removing finished records older than Retention. The
// cutoff travels in the command, so every replica removes the same ones.
func (n *Node) expire() {
	ctx, cancel := context.WithTimeout(n.bgCtx, n.cfg.LeaderWait)
	defer cancel()
	resp, err := n.Apply(ctx, fsm.Expire(time.Now().UTC().Add(-n.cfg.Retention)))
	if err != nil {
		n.log.Warn("retention: expire failed", slog.Any("err", err))
		return
	}
	if resp.Count > 0 {
		n.log.Info("retention: removed finished records", slog.Int("count", resp.Count), slog.Duration("retention", n.cfg.Retention))
	}
}

// pruneAudit proposes the pruning of the audit ledger's entries older than
// AuditRetention, when the oldest is.
func (n *Node) pruneAudit() {
	cutoff := time.Now().UTC().Add(-n.cfg.AuditRetention)
	if oldest, ok := n.ledger.Oldest(); !ok || !oldest.Before(cutoff) {
		return
	}
	ctx, cancel := context.WithTimeout(n.bgCtx, n.cfg.LeaderWait)
	defer cancel()
	if _, err := n.Apply(ctx, fsm.AuditPrune(cutoff)); err != nil {
		n.log.Warn("audit retention: prune failed", slog.Any("err", err))
		return
	}
	n.log.Info("audit retention: pruned the ledger", slog.Any("checkpoint", n.ledger.Checkpoint()), slog.Duration("retention", n.cfg.AuditRetention))
}

// DefaultAuditCheckpointEvery is how often the leader signs the audit
// ledger's head, unless Config.AuditCheckpointEvery says otherwise.
const DefaultAuditCheckpointEvery = time.Minute

func (n *Node) auditCheckpointEvery() time.Duration {
	if n.cfg.AuditCheckpointEvery > 0 {
		return n.cfg.AuditCheckpointEvery
	}
	return DefaultAuditCheckpointEvery
}

// signAudit proposes a checkpoint entry signing the ledger's head, unless
// the head is itself a checkpoint: nothing was appended since the last
// one, whichever leader signed it, and whether or not its proposal was
// answered (one that timed out may have committed). So a checkpoint never
// signs a checkpoint.
func (n *Node) signAudit() {
	// The ledger's writer may stand far behind the applied state (on a
	// follower that just took over under load, by thousands of entries):
	// sign the head of what is applied, not of what happens to be written,
	// so that the checkpoint signs an entry a few back at most.
	n.ledger.FlushQueued()
	head, err := n.AuditHead()
	if err != nil || head.Seq == 0 {
		return
	}
	if last, ok, err := n.ledger.Entry(head.Seq); err != nil || (ok && last.Kind == audit.KindCheckpoint) {
		return
	}
	ctx, cancel := context.WithTimeout(n.bgCtx, n.cfg.LeaderWait)
	defer cancel()
	if _, err := n.Apply(ctx, fsm.AuditCheckpoint(audit.Sign(n.cfg.AuditSigningKey, head))); err != nil {
		n.log.Warn("audit: signing a checkpoint failed", slog.Any("err", err))
	}
}

// isVoter reports whether id is in the Raft configuration.
func (n *Node) isVoter(id string) (raft.Server, bool) {
	cfg := n.raft.GetConfiguration()
	if cfg.Error() != nil {
		return raft.Server{}, false
	}
	for _, s := range cfg.Configuration().Servers {
		if string(s.ID) == id {
			return s, true
		}
	}
	return raft.Server{}, false
}

// hasNodeInfo reports whether the member table holds info as it is.
func (n *Node) hasNodeInfo(info fsm.NodeInfo) bool {
	old, ok := n.fsm.Node(info.ID)
	return ok && old == info
}
