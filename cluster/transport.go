package cluster

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster/nodeauth"
)

// Raft transport settings.
const (
	raftMaxPool = 8
	raftTimeout = 10 * time.Second
	// raftMaxInFlight is 1: replication to each follower is synchronous,
	// one AppendEntries at a time, never pipelined. hashicorp/raft's
	// pipeline (the default, 2 in flight) can deadlock: when a follower
	// answers Success=false or a newer term, the pipeline's decoder stops
	// reading while the sender parks on a full channel, and
	// pipelineReplicate never returns. The follower then gets heartbeats
	// but no entries, for good, and the leader's Raft.Shutdown hangs
	// waiting for that goroutine (seen here: a leader stopped in
	// TestLeaderLossKeepsServing on a loaded machine waited 8 minutes).
	// With group commit a round is one entry batch per follower anyway,
	// which is what pipelining would overlap.
	raftMaxInFlight = 1
)

// newTransport listens on cfg.RaftAddr and returns the Raft transport,
// through cfg.Hooks.RaftStream when set, over mutual TLS when t is set and
// else authenticated by the cluster key (nodeauth.NewKeyStream), and its
// identity layer (whose lookup the node sets once Raft runs). The node
// advertises raftAdvertise's address.
func newTransport(cfg Config, t *nodeauth.TLS, refusals *nodeauth.Refusals) (*raft.NetworkTransport, *nodeauth.IdentityStream, error) {
	ln, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		return nil, nil, &ListenError{Listener: ListenerRaft, Addr: cfg.RaftAddr, Err: err}
	}
	advertise, err := raftAdvertise(cfg.RaftAddr, ln.Addr())
	if err != nil {
		_ = ln.Close()
		return nil, nil, err
	}
	var stream raft.StreamLayer = &tcpStream{Listener: ln, advertise: advertise}
	if cfg.Hooks.RaftStream != nil {
		stream = cfg.Hooks.RaftStream(stream)
	}
	// Every connection is authenticated before a Raft byte is read: by
	// mutual TLS with node certificates, or else by the cluster key
	// (Validate requires one of them). Never by its source address.
	if t != nil {
		stream = nodeauth.NewTLSStream(stream, t, refusals)
	} else {
		stream = nodeauth.NewKeyStream(stream, cfg.ClusterKey, refusals)
	}
	ident := nodeauth.NewIdentityStream(stream, cfg.NodeID, refusals)
	tr := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:          ident,
		MaxPool:         raftMaxPool,
		MaxRPCsInFlight: raftMaxInFlight,
		Timeout:         raftTimeout,
		Logger:          newHCLog(cfg.Logger, "raft-net"),
	})
	return tr, ident, nil
}

// raftAdvertise returns the address a node bound at bound advertises for
// --raft-addr flagAddr. A host name is advertised as given (with the bound
// port when the flag's is 0), so that a node whose IP changes across
// restarts (containers, pods) keeps its address in the Raft configuration
// and two nodes can never swap addresses; an IP is advertised as bound. An
// unspecified IP (0.0.0.0, ::) cannot be advertised: peers could not dial
// it back.
func raftAdvertise(flagAddr string, bound net.Addr) (net.Addr, error) {
	host, port, err := net.SplitHostPort(flagAddr)
	if err != nil {
		return nil, fmt.Errorf("cluster: raft address %q: %w", flagAddr, err)
	}
	tcp, ok := bound.(*net.TCPAddr)
	if !ok {
		return nil, fmt.Errorf("cluster: raft listener on %s is not TCP", bound)
	}
	if host != "" && net.ParseIP(host) == nil {
		if port == "0" {
			port = fmt.Sprint(tcp.Port)
		}
		return namedAddr(net.JoinHostPort(host, port)), nil
	}
	if tcp.IP == nil || tcp.IP.IsUnspecified() {
		return nil, fmt.Errorf("cluster: raft address %s is not advertisable: peers cannot dial an unspecified address back; give the node's IP or host name", flagAddr)
	}
	return tcp, nil
}

// namedAddr is a TCP address advertised by host name.
type namedAddr string

func (a namedAddr) Network() string { return "tcp" }
func (a namedAddr) String() string  { return string(a) }

// tcpStream is the plain Raft stream layer: TCP connections accepted on
// the listener and dialled to peers' advertised addresses.
type tcpStream struct {
	net.Listener
	advertise net.Addr
}

func (s *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

func (s *tcpStream) Addr() net.Addr { return s.advertise }
