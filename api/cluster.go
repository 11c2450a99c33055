package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/store"
)

// Cluster is what the server needs of a cluster for SPEC §2.6. A node
// without one answers the cluster routes as a cluster of itself cannot:
// 404 NOT_FOUND.
type Cluster interface {
	// Status returns the node's view of the cluster.
	Status(ctx context.Context) (ClusterStatus, error)
	// AddNode adds a voter (idempotently); served by any node.
	AddNode(ctx context.Context, n NodeSpec) error
	// RemoveNode removes a node from the configuration; served by any node.
	RemoveNode(ctx context.Context, id string) error
}

// NodeSpec names a node to add.
type NodeSpec struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// ClusterNode is one member in GET /v1/cluster. A node of a Raft cluster
// has RaftAddr, Suffrage and Gossip; a node of a fleet on PostgreSQL
// (SPEC §8) has none of them, and its Heartbeat ("alive" or "dead"),
// LastHeartbeat (RFC 3339, the database's clock) and Version instead.
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

func (s *Server) clusterRoutes() {
	auth := s.auth.authenticate
	e := s.echo
	e.GET("/v1/cluster", s.clusterStatus, auth, requireAdmin)
	e.POST("/v1/cluster/nodes", s.addNode, s.audited(ActionJoin), auth, requireAdmin)
	e.DELETE("/v1/cluster/nodes/:id", s.removeNode, s.audited(ActionRemove), auth, requireAdmin)
}

func (s *Server) cluster() (Cluster, error) {
	if s.clu == nil {
		return nil, newError(store.CodeNotFound, "this node is not part of a cluster")
	}
	return s.clu, nil
}

func (s *Server) clusterStatus(c echo.Context) error {
	clu, err := s.cluster()
	if err != nil {
		return err
	}
	st, err := clu.Status(c.Request().Context())
	if err != nil {
		return err
	}
	if st.Nodes == nil {
		st.Nodes = []ClusterNode{}
	}
	return c.JSON(http.StatusOK, st)
}

func (s *Server) addNode(c echo.Context) error {
	clu, err := s.cluster()
	if err != nil {
		return err
	}
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	var spec NodeSpec
	if err := decodeStrict(body, &spec); err != nil {
		return err
	}
	c.Set(auditTargetKey, spec.ID+" raft="+spec.RaftAddr+" http="+spec.HTTPAddr)
	switch {
	case spec.ID == "":
		return invalidField("id", `"id" is required`)
	case spec.RaftAddr == "":
		return invalidField("raft_addr", `"raft_addr" is required`)
	case spec.HTTPAddr == "":
		return invalidField("http_addr", `"http_addr" is required`)
	}
	if err := clu.AddNode(c.Request().Context(), spec); err != nil {
		return err
	}
	return s.clusterStatus(c)
}

func (s *Server) removeNode(c echo.Context) error {
	clu, err := s.cluster()
	if err != nil {
		return err
	}
	if err := clu.RemoveNode(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return s.clusterStatus(c)
}
