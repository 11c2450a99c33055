package embed

import (
	"context"
	"io"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store/audit"
)

// clusterAdmin adapts a cluster.Node to the API's Cluster interface:
// GET /v1/cluster and the Raft membership routes.
type clusterAdmin struct{ n *cluster.Node }

var _ api.Cluster = clusterAdmin{}

func (a clusterAdmin) Status(ctx context.Context) (api.ClusterStatus, error) {
	st, err := a.n.Status(ctx)
	if err != nil {
		return api.ClusterStatus{}, err
	}
	out := api.ClusterStatus{
		CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex,
		Entries: st.Entries, Capacity: st.Capacity, Nodes: make([]api.ClusterNode, 0, len(st.Nodes)),
	}
	if st.LeaderID != "" {
		out.Leader = &api.ClusterLeader{ID: st.LeaderID, HTTPAddr: st.LeaderHTTPAddr}
	}
	for _, n := range st.Nodes {
		out.Nodes = append(out.Nodes, api.ClusterNode{ID: n.ID, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr, Suffrage: n.Suffrage, Gossip: n.Gossip, Version: n.Version})
	}
	return out, nil
}

func (a clusterAdmin) AddNode(ctx context.Context, n api.NodeSpec) error {
	_, err := a.n.AddNode(ctx, cluster.NodeInfo{ID: n.ID, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr})
	return err
}

func (a clusterAdmin) RemoveNode(ctx context.Context, id string) error {
	return a.n.RemoveNode(ctx, id)
}

// clusterAdmin serves the audit ledger too (GET /v1/audit), from this
// node's copy.
var _ api.Ledger = clusterAdmin{}

func (a clusterAdmin) AuditHead(context.Context) (audit.Head, error) { return a.n.AuditHead() }

func (a clusterAdmin) AuditExport(_ context.Context, w io.Writer, after uint64, limit int) error {
	_, err := a.n.AuditExport(w, after, limit)
	return err
}
