package robustness

import (
	"testing"

	"github.com/carmyhq/carmy/api/wire"
	"github.com/carmyhq/carmy/tests/testutil"
)

// TestFleetViewWhole checks what makes one node's GET /v1/cluster a whole
// fleet: a PostgreSQL store, its database reachable, every node alive.
func TestFleetViewWhole(t *testing.T) {
	names := []string{"n1", "n2"}
	alive := func(id string) wire.ClusterNode { return wire.ClusterNode{ID: id, Heartbeat: "alive"} }
	whole := testutil.ClusterStatus{Store: storePostgres, Database: &wire.ClusterDatabase{Reachable: true},
		Nodes: []wire.ClusterNode{alive("n1"), alive("n2")}}
	if err := fleetViewWhole(whole, names); err != nil {
		t.Fatalf("whole fleet: %v", err)
	}
	for name, st := range map[string]testutil.ClusterStatus{
		"a Raft cluster":          {Nodes: whole.Nodes},
		"database unreachable":    {Store: storePostgres, Database: &wire.ClusterDatabase{}, Nodes: whole.Nodes},
		"a node missing":          {Store: storePostgres, Database: whole.Database, Nodes: whole.Nodes[:1]},
		"a node's heartbeat dead": {Store: storePostgres, Database: whole.Database, Nodes: []wire.ClusterNode{alive("n1"), {ID: "n2", Heartbeat: "dead"}}},
	} {
		if err := fleetViewWhole(st, names); err == nil {
			t.Errorf("%s: taken as whole", name)
		}
	}
}
