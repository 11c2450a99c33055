package cluster

import (
	"bufio"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"slices"

	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/fsm"
)

// PeerHandler serves the node's peer endpoints, the node-to-node HTTP
// calls of package peer (mount it at peer.Prefix): only cluster members
// may call them, over mutual TLS with a node certificate with node TLS,
// with the cluster key when one is set (both when both are); never on the
// strength of their address.
func (n *Node) PeerHandler() http.Handler {
	return peer.Handler(peerServer{n}, peer.Guard{ClusterKey: n.cfg.ClusterKey, NodeTLS: n.tls != nil, Refusals: n.refusals})
}

// InternalHandler is PeerHandler.
//
// Deprecated: use PeerHandler; "internal" named the node-to-node
// endpoints before package peer did.
func (n *Node) InternalHandler() http.Handler { return n.PeerHandler() }

// peerServer is the node as peer.Handler serves it: what a node does when
// a peer calls it.
type peerServer struct{ n *Node }

var _ peer.Server = peerServer{}

func (s peerServer) Stream(r *http.Request, conn net.Conn, rw *bufio.ReadWriter) {
	s.n.serveStream(r, conn, rw)
}

func (s peerServer) ReadIndex(r *http.Request) (uint64, error) {
	return s.n.leaderReadIndex(r.Context())
}

// Join adds info (a joining node, or a member's new addresses) and
// answers the members, this node among them with its gossip address.
func (s peerServer) Join(r *http.Request, info fsm.NodeInfo) ([]fsm.NodeInfo, error) {
	n := s.n
	nodes, err := n.addNode(r.Context(), info)
	n.audit(r, "join", slog.String("target", info.ID), slog.String("target_raft_addr", info.RaftAddr),
		slog.String("target_http_addr", info.HTTPAddr), slog.String("outcome", outcomeOf(err)))
	if err != nil {
		return nil, err
	}
	// The table may not list this node's gossip address yet (it registers
	// itself in the background); the joiner needs one to enter the pool.
	if !slices.ContainsFunc(nodes, func(m fsm.NodeInfo) bool { return m.ID == n.cfg.NodeID && m.GossipAddr != "" }) {
		nodes = append(nodes, n.info())
	}
	return nodes, nil
}

func (s peerServer) Remove(r *http.Request, id string) error {
	err := s.n.RemoveNode(r.Context(), id)
	s.n.audit(r, "remove", slog.String("target", id), slog.String("outcome", outcomeOf(err)))
	return err
}

func (s peerServer) State(*http.Request) (peer.StateDigest, error) { return s.n.Digest() }

func (s peerServer) Silence(r *http.Request, check bool) peer.LogPosition {
	return s.n.serveSilence(r, check)
}

// ServerTLSConfig is the TLS configuration the node's HTTP listener serves
// to other nodes (those naming tlsmux.NodeServerName): the node's
// certificate, TLS 1.3, and a client certificate required and checked
// against the cluster CA. It is nil without node TLS.
func (n *Node) ServerTLSConfig() *tls.Config {
	if n.tls == nil {
		return nil
	}
	c := n.tls.ServerConfig()
	c.NextProtos = []string{"http/1.1"}
	return c
}
