package cluster

import (
	"fmt"
	"log/slog"

	"github.com/hashicorp/memberlist"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store"
)

// claimRefusal decides, on the leader, whether a join may take a member's
// id: a join naming a member's id from another Raft address replaces that
// member's entry only when the member is not live. A member that came back
// on new addresses is dead at its old ones (or gossip already sees it at
// the new ones), so it gets its id back; a second node started with the
// same id (a forgotten --node-id) is refused while the member lives, else
// the leader would cut the member off and the cluster lose its quorum.
//
// The refusal is store.ErrInvalidState (409 INVALID_STATE), naming the id,
// both sets of addresses and how to replace a dead member; the leader
// logs it as a warning. A joiner that gets it gives up (joinCluster).
func (n *Node) claimRefusal(info fsm.NodeInfo) error {
	s, member := n.isVoter(info.ID)
	if !member || string(s.Address) == info.RaftAddr {
		return nil
	}
	why, live := n.liveElsewhere(info)
	if !live {
		return nil
	}
	old := fsm.NodeInfo{ID: info.ID, RaftAddr: string(s.Address)}
	if e, ok := n.fsm.Node(info.ID); ok {
		old.HTTPAddr = e.HTTPAddr
	}
	n.log.Warn("refused a join: the node id belongs to a live member; the joining node needs an id of its own",
		slog.String("id", info.ID), slog.String("member_raft_addr", old.RaftAddr), slog.String("member_http_addr", old.HTTPAddr),
		slog.String("joiner_raft_addr", info.RaftAddr), slog.String("joiner_http_addr", info.HTTPAddr), slog.String("live", why))
	return store.ErrInvalidState.WithMessage(fmt.Sprintf(
		"node id %q belongs to a live member (%s) at raft address %s, http address %s; this node (raft address %s, http address %s) "+
			"needs an id of its own (--node-id). To replace that member, stop it and remove it first "+
			"(carmy cluster remove %s), or start the replacement once gossip sees the member dead",
		info.ID, why, old.RaftAddr, old.HTTPAddr, info.RaftAddr, info.HTTPAddr, info.ID))
}

// liveElsewhere reports whether the member named info.ID is live other
// than as the node info describes, and why: it is this node (the leader),
// or gossip sees it alive or suspect under another Raft address than
// info's. Gossip that sees the member at info's own Raft address sees the
// joiner itself: a member back on new addresses whose old self is gone.
func (n *Node) liveElsewhere(info fsm.NodeInfo) (string, bool) {
	if info.ID == n.cfg.NodeID {
		return "it is the leader", true
	}
	for _, m := range n.gossip.Members() {
		if m.Name != info.ID {
			continue
		}
		if meta, ok := n.members.Info(m.Name); ok && meta.RaftAddr == info.RaftAddr {
			return "", false
		}
		state := GossipAlive
		if m.State == memberlist.StateSuspect {
			state = GossipSuspect
		}
		return fmt.Sprintf("gossip sees it %s at %s", state, m.Address()), true
	}
	return "", false
}
