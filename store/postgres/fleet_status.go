package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// FleetNode is one node of the fleet as its heartbeat row shows it.
type FleetNode struct {
	ID        string
	HTTPAddr  string
	Version   string
	StartedAt time.Time // when this run of the node first beat
	LastBeat  time.Time // the server's clock
	Lease     time.Duration
	Alive     bool // LastBeat is within Lease, by the server's clock
}

// Database is what a node knows of the database now.
type Database struct {
	Reachable bool
	Version   string // server_version, when reachable
	Schema    string // the schema of the tables, once open
}

// statusTimeout bounds the queries of Nodes and DatabaseStatus.
const statusTimeout = 2 * time.Second

// Nodes returns every node's heartbeat row, by id, read now. An error
// matches store.ErrUnavailable.
func (f *Fleet) Nodes(ctx context.Context) ([]FleetNode, error) {
	s, err := f.store()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	rows, err := f.pool.Query(ctx, s.fq.nodes)
	if err != nil {
		return nil, readErr("nodes", err)
	}
	nodes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (FleetNode, error) {
		var (
			n       FleetNode
			leaseUS int64
		)
		err := row.Scan(&n.ID, &n.HTTPAddr, &n.Version, &n.StartedAt, &n.LastBeat, &leaseUS, &n.Alive)
		n.StartedAt, n.LastBeat, n.Lease = n.StartedAt.UTC(), n.LastBeat.UTC(), time.Duration(leaseUS)*time.Microsecond
		return n, err
	})
	if err != nil {
		return nil, readErr("nodes", err)
	}
	return nodes, nil
}

// DatabaseStatus asks the server its version, now.
func (f *Fleet) DatabaseStatus(ctx context.Context) Database {
	var db Database
	if s := f.st.Load(); s != nil {
		db.Schema = s.Schema()
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	if err := f.pool.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&db.Version); err == nil {
		db.Reachable = true
	}
	return db
}
