package embed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/mcp"
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/mcpgateway"
	"github.com/carmyhq/carmy/metrics/prom"
	"github.com/carmyhq/carmy/store/postgres"
)

// Config is what StartNode needs to run a node: the runtime with its
// tools, the API's listener and configuration, and where the records
// live: a Raft cluster (Raft) or a fleet sharing a PostgreSQL database
// (Postgres), exactly one of them. NewConfig builds one with the carmy
// binary's policy (the config file, tenant isolation, access rules); one
// built by hand gets what it sets and nothing more.
//
// The node has one id, the runtime's (carmy.WithNodeID): its records'
// node_id, its Raft server id and gossip name, its fleet heartbeat, the
// API's. Raft.NodeID, Postgres.Fleet.NodeID and API.NodeID may be left
// empty (StartNode sets them to it); one set to another id is refused, as
// records naming another node than the cluster knows would never get a
// cancel to their runner, nor be marked interrupted when it dies.
type Config struct {
	// Runtime is the node's tool runtime (carmy.App), its tools registered,
	// those of Upstreams included. Required.
	Runtime *carmy.Runtime
	// Listener is where the API (and the node-to-node endpoints) are
	// served. StartNode owns it: Close closes it. Required.
	Listener net.Listener
	// API configures the API: auth, limits, TLS, hosts. StartNode sets
	// its Cluster (GET /v1/cluster and the membership routes), its
	// Peer and NodeTLS (the node-to-node endpoints, with Raft), and
	// and when nil its MCP: package api/mcp's endpoint at /mcp, passing
	// Upstreams through (mcp.EndpointWith); and its Metrics: Prometheus's
	// (prom.New of the runtime), served at GET /metrics.
	API api.Config
	// Raft makes the node a member of a Raft cluster (cluster.Open).
	// HTTPAddr defaults to the Listener's address, Logger to the
	// runtime's, Metrics to the registry of API.Metrics when that is a
	// *prom.Metrics.
	Raft *cluster.Config
	// Postgres makes the node one of a fleet sharing a PostgreSQL
	// database (docs/operations.md#a-fleet-on-postgresql): no Raft, no gossip.
	Postgres *PostgresConfig
	// Upstreams are the upstream MCP servers whose tools the runtime has
	// registered (mcpgateway): StartNode starts them, Close closes them
	// once the runtime has drained.
	Upstreams []*mcpgateway.Upstream
	// WrapPeer, when set, wraps the node-to-node (peer) handler (a test
	// layer's control endpoint beside it).
	WrapPeer func(http.Handler) http.Handler
	// WrapInternal is WrapPeer, applied after it when both are set.
	//
	// Deprecated: use WrapPeer.
	WrapInternal func(http.Handler) http.Handler
}

// PostgresConfig is a fleet node's store: the pool (which the node owns),
// the records' bounds, and the fleet's settings. Fleet.HTTPAddr defaults
// to the Listener's address, Fleet.Logger to the runtime's.
type PostgresConfig struct {
	Pool  *pgxpool.Config
	Store postgres.Config
	Fleet postgres.FleetConfig
}

// Node is a running Carmy node: the runtime on its backend (a cluster
// member or a fleet node), serving the API, MCP, the gateway and the
// console on its listener. Close stops it.
type Node struct {
	rt        *carmy.Runtime
	ln        net.Listener
	raft      *cluster.Node
	fleet     *postgres.Fleet
	upstreams []*mcpgateway.Upstream
	log       *slog.Logger

	stopServing context.CancelFunc
	served      chan struct{} // closed when Serve has returned
	accepting   chan struct{} // closed when the API's listener is first asked for a connection
	ready       chan struct{} // closed once accepting and the runtime is ready (Ready)
	serveErr    error         // Serve's error, read after served

	stopFleet context.CancelFunc
	fleetDone chan error // the fleet's Run, once it returned

	closeOnce sync.Once
	closeErr  error
}

// StartNode opens the node's backend (joining or founding a Raft
// cluster, or a fleet, as cfg says), makes it the runtime's, starts the
// upstream MCP servers and serves the API on cfg.Listener. It returns
// once serving has begun; the runtime takes calls once its backend is
// ready (calls answer UNAVAILABLE until then, carmy.Runtime.Serve; Node.Ready
// closes when they can succeed). ctx's values reach
// the upstream MCP servers' start; its end stops nothing: Close stops the
// node. On an error nothing is left running, the listener closed.
func StartNode(ctx context.Context, cfg Config) (*Node, error) {
	switch {
	case cfg.Runtime == nil || cfg.Listener == nil:
		if cfg.Listener != nil {
			cfg.Listener.Close()
		}
		return nil, errors.New("StartNode: a Runtime and a Listener are required")
	case (cfg.Raft == nil) == (cfg.Postgres == nil):
		cfg.Listener.Close()
		return nil, errors.New("StartNode: exactly one of Raft and Postgres is required")
	}
	if err := oneNodeID(&cfg); err != nil {
		cfg.Listener.Close()
		return nil, err
	}
	serveCtx, stopServing := context.WithCancel(context.Background())
	n := &Node{rt: cfg.Runtime, upstreams: cfg.Upstreams, log: cfg.Runtime.Config().Logger,
		stopServing: stopServing, served: make(chan struct{}), accepting: make(chan struct{}), ready: make(chan struct{})}
	n.ln = &signalListener{Listener: cfg.Listener, accepting: n.accepting}
	apiCfg := cfg.API
	if apiCfg.Metrics == nil {
		apiCfg.Metrics = prom.New(cfg.Runtime.Engine())
	}
	var err error
	if cfg.Raft != nil {
		err = n.openRaft(*cfg.Raft, &apiCfg, cfg.WrapPeer, cfg.WrapInternal)
	} else {
		err = n.openFleet(*cfg.Postgres, &apiCfg)
	}
	if err != nil {
		stopServing()
		cfg.Listener.Close()
		return nil, err
	}
	if err := n.startUpstreams(ctx); err != nil {
		stopServing()
		_ = n.stopBackend(context.Background())
		n.closeStore()
		cfg.Listener.Close()
		return nil, err
	}
	if apiCfg.MCP == nil {
		apiCfg.MCP = mcp.Endpoint
		if len(cfg.Upstreams) > 0 {
			apiCfg.MCP = mcp.EndpointWith(mcpgateway.NewDirectory(cfg.Upstreams))
		}
	}
	if n.raft != nil {
		go n.stopServingOnFailure(serveCtx)
	}
	go func() {
		defer close(n.served)
		n.serveErr = n.rt.Serve(serveCtx, n.ln, apiCfg)
	}()
	go n.watchReady()
	return n, nil
}

// openRaft opens the cluster member and makes its replicated store the
// runtime's backend; the leader probes (docs/config.md#reconcile-probes).
// Each of wraps that is not nil wraps the member's peer handler, in turn.
func (n *Node) openRaft(c cluster.Config, apiCfg *api.Config, wraps ...func(http.Handler) http.Handler) error {
	if c.HTTPAddr == "" {
		c.HTTPAddr = n.ln.Addr().String()
	}
	if c.Logger == nil {
		c.Logger = n.log
	}
	if pm, ok := apiCfg.Metrics.(*prom.Metrics); ok && c.Metrics == nil {
		c.Metrics = pm.Registry()
	}
	node, err := cluster.Open(c)
	if err != nil {
		return err
	}
	n.raft = node
	n.rt.IdempotencyStore(node.Store())
	n.rt.Engine().SetProbeOwner(node.IsLeader)
	peer := node.PeerHandler()
	for _, wrap := range wraps {
		if wrap != nil {
			peer = wrap(peer)
		}
	}
	apiCfg.Cluster, apiCfg.Peer, apiCfg.NodeTLS = clusterAdmin{node}, peer, node.ServerTLSConfig()
	apiCfg.Ledger = clusterAdmin{node}
	return nil
}

// stopServingOnFailure stops serving when the Raft node gives up (its
// join refused for good: cluster.Node.Failed), so that Done closes and
// Close returns why; it returns once serving ends otherwise.
func (n *Node) stopServingOnFailure(serving context.Context) {
	select {
	case <-n.raft.Failed():
		n.log.Error("the cluster member gave up; stopping", slog.Any("err", n.raft.Failure()))
		n.stopServing()
	case <-serving.Done():
	}
}

// openFleet makes the fleet node, its backend the runtime's, and runs it
// until Close; the holder of the prober lock probes. The fleet gives up
// only on what waiting cannot cure (tables newer than this build, a
// refused migration): the node then stops serving, and Close returns
// that error.
func (n *Node) openFleet(c PostgresConfig, apiCfg *api.Config) error {
	if c.Fleet.HTTPAddr == "" {
		c.Fleet.HTTPAddr = n.ln.Addr().String()
	}
	if c.Fleet.Logger == nil {
		c.Fleet.Logger = n.log
	}
	fleet, err := postgres.NewFleet(c.Pool, c.Store, c.Fleet)
	if err != nil {
		return err
	}
	n.fleet = fleet
	n.rt.IdempotencyStore(fleet)
	n.rt.Engine().SetProbeOwner(fleet.ProbeOwner)
	apiCfg.Cluster, apiCfg.Ledger = fleetAdmin{fleet}, fleetAdmin{fleet}
	fleetCtx, stop := context.WithCancel(context.Background())
	n.stopFleet, n.fleetDone = stop, make(chan error, 1)
	go func() {
		err := fleet.Run(fleetCtx)
		if err != nil {
			n.stopServing()
		}
		n.fleetDone <- err
	}()
	return nil
}

// startUpstreams starts the upstream MCP servers, which connect in the
// background.
func (n *Node) startUpstreams(ctx context.Context) error {
	for _, u := range n.upstreams {
		if err := u.Start(context.WithoutCancel(ctx)); err != nil {
			n.closeUpstreams()
			return fmt.Errorf("mcp server %q: %w", u.Name(), err)
		}
	}
	return nil
}

// closeUpstreams closes the upstream MCP servers (stopping stdio
// children).
func (n *Node) closeUpstreams() {
	for _, u := range n.upstreams {
		u.Close()
	}
}
