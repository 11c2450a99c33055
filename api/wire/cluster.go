// Package wire holds the JSON bodies of Carmy's HTTP API that the server
// (package api) sends and the Go client (api/client) decodes, declared
// once so that neither redeclares the other's. It imports only the
// standard library: a program that links the client links no server.
package wire

// NodeSpec names a node to add.
type NodeSpec struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// ClusterNode is one member in GET /v1/cluster (docs/api.md#cluster-administration). A node of a Raft cluster
// has RaftAddr, Suffrage and Gossip; a node of a fleet on PostgreSQL
// (docs/operations.md#a-fleet-on-postgresql) has none of them, and its Heartbeat ("alive" or "dead") and
// LastHeartbeat (RFC 3339, the database's clock) instead. Version is the
// version of Carmy the node runs: from its gossip metadata on a Raft
// cluster (empty until gossip has heard from it), from its heartbeat row
// on a fleet.
type ClusterNode struct {
	ID            string `json:"id"`
	RaftAddr      string `json:"raft_addr,omitempty"`
	HTTPAddr      string `json:"http_addr"`
	Suffrage      string `json:"suffrage,omitempty"`
	Gossip        string `json:"gossip,omitempty"`
	Heartbeat     string `json:"heartbeat,omitempty"`
	LastHeartbeat string `json:"last_heartbeat,omitempty"`
	Version       string `json:"version,omitempty"`
}

// ClusterDatabase is the database of a fleet on PostgreSQL, as the
// answering node sees it now.
type ClusterDatabase struct {
	Reachable bool   `json:"reachable"`
	Version   string `json:"version,omitempty"`
	Schema    string `json:"schema,omitempty"`
}

// ClusterLeader is the leader in GET /v1/cluster.
type ClusterLeader struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
}

// ClusterStatus is the answer of GET /v1/cluster. Store is "postgres"
// for a fleet (no leader, no Raft indexes, and the Database), omitted for
// a Raft cluster.
type ClusterStatus struct {
	Store        string           `json:"store,omitempty"`
	Database     *ClusterDatabase `json:"database,omitempty"`
	Leader       *ClusterLeader   `json:"leader"`
	Nodes        []ClusterNode    `json:"nodes"`
	CommitIndex  uint64           `json:"commit_index"`
	AppliedIndex uint64           `json:"applied_index"`
	Entries      int              `json:"entries"`
	Capacity     int              `json:"capacity"`
}
