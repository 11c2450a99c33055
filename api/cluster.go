package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/api/wire"
	"github.com/carmyhq/carmy/store"
)

// Cluster is what the server needs of a cluster for docs/api.md#cluster-administration. A node
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

// The bodies of the cluster routes are package wire's, which the Go
// client (api/client) decodes too.
type (
	NodeSpec        = wire.NodeSpec
	ClusterNode     = wire.ClusterNode
	ClusterDatabase = wire.ClusterDatabase
	ClusterLeader   = wire.ClusterLeader
	ClusterStatus   = wire.ClusterStatus
)

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
	if err := clu.AddNode(actorContext(c), spec); err != nil {
		return err
	}
	return s.clusterStatus(c)
}

func (s *Server) removeNode(c echo.Context) error {
	clu, err := s.cluster()
	if err != nil {
		return err
	}
	if err := clu.RemoveNode(actorContext(c), c.Param("id")); err != nil {
		return err
	}
	return s.clusterStatus(c)
}
