package cluster

import (
	"context"
	"fmt"

	"github.com/carmyhq/carmy/internal/buildinfo"
	"github.com/carmyhq/carmy/store"
)

// NodeStatus is one member as GET /v1/cluster shows it.
type NodeStatus struct {
	ID       string
	RaftAddr string
	HTTPAddr string
	// Suffrage is "voter" or "nonvoter".
	Suffrage string
	// Gossip is "alive", "suspect", "dead" or "unknown".
	Gossip string
	// Version is the version of Carmy the member runs, as it says in its
	// gossip metadata; "" until gossip has heard from it.
	Version string
}

// Status is the node's view of the cluster.
type Status struct {
	LeaderID, LeaderHTTPAddr string
	Nodes                    []NodeStatus
	CommitIndex              uint64
	AppliedIndex             uint64
	store.Stats
}

// Status returns this node's view of the cluster: the Raft configuration
// with each member's addresses and gossip state, and the log's progress.
func (n *Node) Status(context.Context) (Status, error) {
	cfg := n.raft.GetConfiguration()
	if err := cfg.Error(); err != nil {
		return Status{}, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	var st Status
	st.LeaderID, st.LeaderHTTPAddr = n.Leader()
	for _, s := range cfg.Configuration().Servers {
		ns := NodeStatus{ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: "nonvoter", Gossip: n.gossipState(string(s.ID)),
			Version: n.members.Version(string(s.ID))}
		if ns.ID == n.cfg.NodeID {
			ns.Version = buildinfo.Version()
		}
		if s.Suffrage == 0 { // raft.Voter
			ns.Suffrage = "voter"
		}
		if info, ok := n.fsm.Node(ns.ID); ok {
			ns.HTTPAddr = info.HTTPAddr
		} else if info, ok := n.members.Info(ns.ID); ok {
			ns.HTTPAddr = info.HTTPAddr
		}
		st.Nodes = append(st.Nodes, ns)
	}
	st.CommitIndex = n.raft.CommitIndex()
	// Raft's applied index counts every entry (no-ops included), so it
	// reaches the commit index; the FSM's counts only what it is given.
	st.AppliedIndex = n.raft.AppliedIndex()
	st.Stats = n.fsm.Stats()
	return st, nil
}
