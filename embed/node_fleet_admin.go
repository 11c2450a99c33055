package embed

import (
	"context"
	"io"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
	"github.com/carmyhq/carmy/store/postgres"
)

// fleetAdmin adapts a postgres.Fleet to the API's Cluster interface:
// GET /v1/cluster lists the nodes from their heartbeats, with no leader,
// and the database; the Raft membership routes answer 409 INVALID_STATE
// (docs/operations.md#a-fleet-on-postgresql).
type fleetAdmin struct{ f *postgres.Fleet }

var _ api.Cluster = fleetAdmin{}

// errNoMembership answers the membership routes of a fleet node.
var errNoMembership = store.NewError(store.CodeInvalidState,
	"this node's store is PostgreSQL: its nodes share the database and have no Raft membership to change")

func (a fleetAdmin) Status(ctx context.Context) (api.ClusterStatus, error) {
	db := a.f.DatabaseStatus(ctx)
	out := api.ClusterStatus{
		Store:    "postgres",
		Database: &api.ClusterDatabase{Reachable: db.Reachable, Version: db.Version, Schema: db.Schema},
		Nodes:    []api.ClusterNode{},
	}
	st, err := a.f.Stats(ctx)
	out.Entries, out.Capacity = st.Entries, st.Capacity
	if err != nil {
		out.Database.Reachable = false
		return out, nil
	}
	nodes, err := a.f.Nodes(ctx)
	if err != nil {
		out.Database.Reachable = false
		return out, nil
	}
	for _, n := range nodes {
		hb := "dead"
		if n.Alive {
			hb = "alive"
		}
		out.Nodes = append(out.Nodes, api.ClusterNode{ID: n.ID, HTTPAddr: n.HTTPAddr, Heartbeat: hb,
			LastHeartbeat: n.LastBeat.Format(time.RFC3339Nano), Version: n.Version})
	}
	return out, nil
}

func (a fleetAdmin) AddNode(context.Context, api.NodeSpec) error { return errNoMembership }

func (a fleetAdmin) RemoveNode(context.Context, string) error { return errNoMembership }

// fleetAdmin serves the audit ledger too (GET /v1/audit), from the
// database: every node of a fleet answers alike.
var _ api.Ledger = fleetAdmin{}

func (a fleetAdmin) AuditHead(ctx context.Context) (audit.Head, error) { return a.f.AuditHead(ctx) }

func (a fleetAdmin) AuditExport(ctx context.Context, w io.Writer, after uint64, limit int) error {
	_, err := a.f.AuditExport(ctx, w, after, limit)
	return err
}
