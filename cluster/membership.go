package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// NodeInfo is a member's addresses, as the cluster records them in its
// member table (fsm.NodeInfo: one type, from the log to the API).
type NodeInfo = fsm.NodeInfo

// AddNode adds (or updates) a voter: the same id and addresses again is a
// no-op; a known id with new addresses replaces its entry when that member
// is not live, and refuses the join (store.ErrInvalidState) while it is
// (claimRefusal); another id on the same Raft address is removed first
// when gossip does not see it alive, and refuses the join (store.ErrInvalid)
// when it does. It may be called
// on any node (a follower forwards it to the leader) and returns the
// member table, sorted by id.
func (n *Node) AddNode(ctx context.Context, info NodeInfo) ([]NodeInfo, error) {
	return n.addNode(ctx, info)
}

// addNode is AddNode with the member table's own entries.
func (n *Node) addNode(ctx context.Context, info fsm.NodeInfo) ([]fsm.NodeInfo, error) {
	if info.ID == "" || info.RaftAddr == "" || info.HTTPAddr == "" {
		return nil, fmt.Errorf("%w: id, raft_addr and http_addr are required", store.ErrInvalid)
	}
	err := n.onLeader(ctx, func() error { return n.addLocal(ctx, info) }, func(addr string) error {
		_, err := n.client.Join(ctx, addr, info)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The change committed on the leader; show it from here too.
	if err := n.ReadBarrier(ctx); err != nil {
		return nil, err
	}
	return n.fsm.Nodes(), nil
}

func (n *Node) addLocal(ctx context.Context, info fsm.NodeInfo) error {
	if err := n.claimRefusal(info); err != nil {
		return err
	}
	cfg := n.raft.GetConfiguration()
	if err := cfg.Error(); err != nil {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	present := false
	for _, s := range cfg.Configuration().Servers {
		switch {
		case string(s.ID) == info.ID && string(s.Address) == info.RaftAddr:
			present = true
		case string(s.ID) != info.ID && string(s.Address) == info.RaftAddr:
			// Two ids on one address would let one process answer for
			// both. A live member keeps its address (addresses can be
			// reused, as container IPs are): the joiner is refused.
			if st := n.gossipState(string(s.ID)); st == GossipAlive || st == GossipSuspect {
				return fmt.Errorf("%w: raft address %s belongs to member %s, which gossip sees %s; remove %s first (or give nodes stable host names)",
					store.ErrInvalid, info.RaftAddr, s.ID, st, s.ID)
			}
			n.log.Info("removing a member whose raft address a joining node now uses", slog.String("old_id", string(s.ID)))
			if err := n.raft.RemoveServer(s.ID, 0, n.cfg.LeaderWait).Error(); err != nil {
				return membershipErr(err)
			}
		}
	}
	if !present {
		if err := n.raft.AddVoter(raft.ServerID(info.ID), raft.ServerAddress(info.RaftAddr), 0, n.cfg.LeaderWait).Error(); err != nil {
			return membershipErr(err)
		}
		n.log.Info("added a voter", slog.String("id", info.ID), slog.String("raft_addr", info.RaftAddr))
		n.recordAdmin(ctx, audit.KindJoin, info.ID)
	}
	if old, ok := n.fsm.Node(info.ID); ok && info.GossipAddr == "" {
		info.GossipAddr = old.GossipAddr
	}
	if old, ok := n.fsm.Node(info.ID); ok && old == info {
		return nil
	}
	resp, err := n.Apply(ctx, fsm.SetNode(info))
	if err != nil {
		return err
	}
	return resp.Err()
}

// RemoveNode removes a voter from the Raft configuration, forgets its
// addresses and marks its running executions interrupted. It may be
// called on any node. An id that is not a member is store.ErrNotFound.
func (n *Node) RemoveNode(ctx context.Context, id string) error {
	if id == "" {
		return fmt.Errorf("%w: id is required", store.ErrInvalid)
	}
	err := n.onLeader(ctx, func() error { return n.removeLocal(ctx, id) }, func(addr string) error {
		return n.client.Remove(ctx, addr, id)
	})
	if err != nil {
		return err
	}
	// The change committed on the leader; let this node's view show it.
	return n.ReadBarrier(ctx)
}

func (n *Node) removeLocal(ctx context.Context, id string) error {
	if _, ok := n.isVoter(id); !ok {
		if _, known := n.fsm.Node(id); !known {
			return store.ErrNotFound.WithMessage(fmt.Sprintf("no member %q", id))
		}
	} else if err := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.LeaderWait).Error(); err != nil {
		return membershipErr(err)
	}
	n.log.Info("removed a member", slog.String("id", id))
	n.recordAdmin(ctx, audit.KindRemove, id)
	if id == n.cfg.NodeID {
		// This leader removed itself and steps down; the next leader's
		// liveness check interrupts its executions.
		return nil
	}
	for _, c := range []fsm.Command{fsm.RemoveNode(id), fsm.Interrupt(id)} {
		if _, err := n.Apply(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// recordAdmin appends an admin action on member id to the audit ledger,
// by the actor ctx names (store.WithActor; this node when none). The
// action itself is done: a failure is logged, not returned.
func (n *Node) recordAdmin(ctx context.Context, kind audit.Kind, id string) {
	if _, err := n.Apply(ctx, fsm.Admin(string(kind), id)); err != nil {
		n.log.Warn("recording an admin action in the audit ledger failed", slog.String("action", string(kind)),
			slog.String("target", id), slog.Any("err", err))
	}
}

func membershipErr(err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		return peer.ErrNotLeader
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// onLeader runs local on the leader, or remote with the leader's HTTP
// address on a follower, retrying while there is no leader (or it moved)
// until LeaderWait passes.
func (n *Node) onLeader(ctx context.Context, local func() error, remote func(addr string) error) error {
	return n.untilLeader(ctx, "no leader", func(time.Time) error {
		if n.IsLeader() {
			return local()
		}
		addr, ok := n.leaderHTTP()
		if !ok {
			return peer.ErrNotSent
		}
		return remote(addr)
	})
}

// joinKeyHint says what to do when a node the joiner asks refuses it.
const joinKeyHint = "that node does not accept this node's cluster key (or its node certificate). " +
	"Every node of a cluster needs the same key: the first node keeps it in <its data-dir>/cluster-key " +
	"(a generated key is logged there at its start); copy that file and start this node with " +
	"--cluster-key-file <the copy>, or give both nodes certificates of one CA (--node-tls-*). Retrying"

// joinCluster asks the --join addresses to add this node until one does,
// then joins the gossip pool through the members it learns of; it reports
// whether it joined. A refusal because a live member holds this node's id
// is final: the node logs it and gives up (Failed), as retrying cannot
// succeed while that member lives.
func (n *Node) joinCluster() bool {
	info := n.info()
	for attempt := 0; !n.stopped(); attempt++ {
		for _, addr := range n.cfg.Join {
			ctx, cancel := context.WithTimeout(n.bgCtx, n.cfg.LeaderWait+2*time.Second)
			nodes, err := n.client.Join(store.WithActor(ctx, n.cfg.NodeID), addr, info)
			cancel()
			if err != nil {
				if store.CodeOf(err) == store.CodeInvalidState {
					n.log.Error("join: refused: another node of the cluster has this node's id; start this node with an id of its own (--node-id). Giving up",
						slog.String("via", addr), slog.Any("err", err))
					n.giveUp(fmt.Errorf("join refused: %w", err))
					return false
				}
				if errors.Is(err, nodeauth.ErrProtocol) {
					n.log.Error("join: refused: that node runs a build of another node protocol version; "+
						"run one build on every node of a cluster. Retrying", slog.String("via", addr), slog.Any("err", err))
				} else if errors.Is(err, peer.ErrRefused) {
					// Retrying will not help until the key is mended: say
					// where the right one is.
					n.log.Error("join: refused: "+joinKeyHint, slog.String("via", addr), slog.Any("err", err))
				} else {
					n.log.Warn("join: asking to be added failed", slog.String("via", addr), slog.Any("err", err))
				}
				continue
			}
			var gossip []string
			for _, m := range nodes {
				if m.ID != n.cfg.NodeID && m.GossipAddr != "" {
					gossip = append(gossip, m.GossipAddr)
				}
			}
			if err := n.JoinGossip(gossip); err != nil {
				n.log.Warn("join: gossip join failed; retrying in the background", slog.Any("err", err))
			}
			n.log.Info("joined the cluster", slog.String("via", addr))
			return true
		}
		if !n.sleep(min(500*time.Millisecond<<min(attempt, 3), 5*time.Second)) {
			return false
		}
	}
	return false
}

// registerSelf makes sure the replicated member table holds this node's
// current addresses (they may change across restarts, and a node added by
// an operator has no gossip address there), once it is a member and a
// leader is known. It writes them only when they are still missing after
// this node has applied everything committed (a read barrier): an entry
// already on its way is not written again.
func (n *Node) registerSelf() {
	for n.sleep(200 * time.Millisecond) {
		if _, member := n.isVoter(n.cfg.NodeID); !member {
			continue
		}
		if id, _ := n.Leader(); id == "" {
			continue
		}
		info := n.info()
		if n.hasNodeInfo(info) {
			return
		}
		ctx, cancel := context.WithTimeout(n.bgCtx, n.cfg.LeaderWait)
		err := n.ReadBarrier(ctx)
		cancel()
		if err != nil {
			n.log.Debug("registering this node's addresses: read barrier", slog.Any("err", err))
			continue
		}
		if n.hasNodeInfo(info) {
			return
		}
		ctx, cancel = context.WithTimeout(n.bgCtx, n.cfg.LeaderWait)
		resp, err := n.Apply(ctx, fsm.SetNode(info))
		cancel()
		if err == nil && resp.Err() == nil {
			n.log.Debug("registered this node's addresses", slog.String("raft_addr", info.RaftAddr), slog.String("http_addr", info.HTTPAddr))
			return
		}
		n.log.Debug("registering this node's addresses", slog.Any("err", errors.Join(err, resp.Err())))
	}
}

// rejoinOnNewAddress runs on a node restarted with state: while the Raft
// configuration it knows lists it under another Raft address (it came back
// on a new one, so the leader cannot reach it), it asks the members it
// knows (--join and the member table) to update its entry, as a join
// would. A node that comes back on its old address never re-adds itself,
// so an operator's removal stands.
func (n *Node) rejoinOnNewAddress() {
	for n.sleep(2 * time.Second) {
		s, member := n.isVoter(n.cfg.NodeID)
		if !member || string(s.Address) == n.RaftAddr() {
			continue
		}
		targets := append([]string(nil), n.cfg.Join...)
		for _, info := range n.knownMembers() {
			if info.ID != n.cfg.NodeID && info.HTTPAddr != "" {
				targets = append(targets, info.HTTPAddr)
			}
		}
		for _, addr := range targets {
			ctx, cancel := context.WithTimeout(n.bgCtx, n.cfg.LeaderWait+2*time.Second)
			_, err := n.client.Join(store.WithActor(ctx, n.cfg.NodeID), addr, n.info())
			cancel()
			if err == nil {
				n.log.Info("updated this node's address in the cluster", slog.String("via", addr), slog.String("raft_addr", n.RaftAddr()))
				break
			}
			n.log.Debug("rejoin on a new address", slog.String("via", addr), slog.Any("err", err))
		}
	}
}

// bootstrapSelf founds a cluster whose only voter is this node. A node
// that already holds state is left as it is (raft.ErrCantBootstrap).
func (n *Node) bootstrapSelf() error {
	boot := raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(n.cfg.NodeID), Address: n.transport.LocalAddr()}}}
	if err := n.raft.BootstrapCluster(boot).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("cluster: bootstrap: %w", err)
	}
	return nil
}

// bootstrapUnlessCluster founds a cluster once every other Join address
// answers that it holds no cluster state, and joins through Join as soon
// as one holds some (BootstrapUnlessCluster). A node that lost its data
// dir thus rejoins its cluster rather than found a second one; while an
// address does not answer, it waits. It reports whether the node is now a
// member (founded or joined).
func (n *Node) bootstrapUnlessCluster() bool {
	for attempt := 0; !n.stopped(); attempt++ {
		found, all := "", true
		for _, addr := range n.cfg.Join {
			if addr == n.cfg.HTTPAddr {
				continue
			}
			ctx, cancel := context.WithTimeout(n.bgCtx, 3*time.Second)
			d, err := n.client.State(ctx, addr)
			cancel()
			switch {
			case err != nil:
				all = false
				n.log.Info("bootstrap: waiting for a member to answer", slog.String("addr", addr), slog.Any("err", err))
			case d.LastIndex > 0 || d.AppliedIndex > 0:
				found = addr
			}
			if found != "" {
				break
			}
		}
		switch {
		case found != "":
			n.log.Info("bootstrap: a cluster exists; joining it instead of founding one", slog.String("via", found))
			return n.joinCluster()
		case all:
			if err := n.bootstrapSelf(); err != nil {
				n.log.Error("bootstrap failed; trying again", slog.Any("err", err))
				break
			}
			n.log.Info("bootstrapped a new cluster: no other member holds cluster state")
			return true
		}
		if !n.sleep(min(500*time.Millisecond<<min(attempt, 3), 5*time.Second)) {
			return false
		}
	}
	return false
}
