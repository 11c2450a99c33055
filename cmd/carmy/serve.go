package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/embed"
)

// serve runs `carmy serve` until ctx is done: it reads the flags and the
// config file, turns them into the node's settings and its configuration
// (embed.NewConfig: the node's policy), adds the node security material
// and the listener, starts the node (embed.StartNode: the Raft member or
// the fleet node, the API, MCP, the gateway, the console) and stops it
// once ctx ends.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	out := stderr
	if wantsHelp(args) {
		out = stdout // asked for: the usage is the output, not an error
	}
	cfg, err := parseServe(args, os.Getenv, out)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, logOut := newLogger(cfg, stderr)
	defer logOut.Close()                  // what is buffered, before the process exits
	cfg.fresh = noPreviousExecutions(cfg) // before the node id is resolved and kept
	var keepNodeID func() error
	if cfg.NodeID, keepNodeID, err = resolveNodeID(cfg, log); err != nil {
		return err
	}
	fc, err := embed.LoadConfig(cfg.ConfigPath)
	if err != nil {
		return err
	}
	flushTracing, err := startTracing(ctx, cfg.NodeID, log)
	if err != nil {
		return err
	}
	defer flushTracing() // once the node has stopped: its last spans
	nc, err := embed.NewConfig(cfg.settings(fc, log))
	if err != nil {
		return err
	}
	var started func(*embed.Node) // logs what started
	if cfg.usesPostgres() {
		started, err = postgresNode(ctx, cfg, &nc, log)
	} else {
		started, err = raftNode(ctx, cfg, &nc, log)
	}
	if err != nil {
		return err
	}
	if err := keepNodeID(); err != nil {
		nc.Listener.Close()
		return err
	}
	node, err := embed.StartNode(ctx, nc)
	if err != nil {
		return explainListen(err)
	}
	started(node)
	return runNode(ctx, node, log)
}

// raftNode completes nc for a member of a Raft cluster: node security,
// the listener (behind the test fault layer when there is one) and the
// address the node advertises.
func raftNode(ctx context.Context, cfg serveConfig, nc *embed.Config, log *slog.Logger) (func(*embed.Node), error) {
	sec, err := loadSecurity(cfg, log)
	if err != nil {
		return nil, err
	}
	ln, err := listen(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	faults := newFaults(os.Getenv, log)
	if faults != nil {
		ln = faults.Listener(ln)
		nc.WrapPeer = func(h http.Handler) http.Handler { return withFaultControl(h, faults, sec.clusterKey) }
	}
	nc.Listener = ln
	if sec.apiKeys != nil {
		nc.API.TLS = sec.apiKeys.ServerConfig()
	}
	nc.Raft.HTTPAddr = advertised(cfg.HTTPAddr, ln.Addr())
	nc.Raft.ClusterKey, nc.Raft.GossipKeys, nc.Raft.TLS = sec.clusterKey, sec.gossipKeys, sec.nodeTLS
	nc.Raft.Hooks = faultHooks(faults)
	return func(node *embed.Node) {
		auth := nc.API.Auth
		log.Info("starting carmy", slog.String("version", version), slog.String("node_id", cfg.NodeID),
			slog.Int("tools", len(nc.Runtime.Tools())), slog.Int("mcp_servers", len(nc.Upstreams)), slog.Bool("auth", auth.Enabled()), slog.Bool("gossip_encrypted", len(sec.gossipKeys) > 0 || sec.clusterKey != ""),
			slog.Bool("node_tls", sec.nodeTLS != nil), slog.Bool("api_tls", sec.apiKeys != nil),
			slog.Int("max_entries", nc.Raft.MaxEntries), slog.Int64("max_bytes", nc.Raft.MaxBytes),
			slog.Int("max_running_per_principal", nc.Runtime.Config().MaxRunningPerPrincipal), slog.Int("entries_per_principal", auth.MaxEntriesPerPrincipal),
			slog.Int64("bytes_per_principal", auth.MaxBytesPerPrincipal),
			slog.String("data_dir", cfg.DataDir))
	}, nil
}

// runNode waits for ctx to end (or the node to stop on its own), then
// stops the node (Node.Close owns the order). After a signal the stop is
// bounded by what is left of the 15 s of
// docs/cli.md#starting-restarting-stopping.
func runNode(ctx context.Context, node *embed.Node, log *slog.Logger) error {
	closeCtx := context.Background()
	select {
	case <-ctx.Done():
		var cancel context.CancelFunc
		closeCtx, cancel = context.WithTimeout(closeCtx, stopBudget)
		defer cancel()
	case <-node.Done(): // serving ended on its own (an error)
	}
	if err := node.Close(closeCtx); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// stopBudget is how long after a signal carmy serve may take to exit:
// the 15 s of docs/cli.md#starting-restarting-stopping, less a margin for the process's own exit.
const stopBudget = 14 * time.Second

// faultsPath is where a node with the test fault layer serves its control.
const faultsPath = "/internal/v1/faults"

// withFaultControl returns peer (the node's peer handler), with the test
// fault layer's control endpoint at faultsPath when faults is not nil.
func withFaultControl(peer http.Handler, faults faultLayer, key string) http.Handler {
	if faults == nil {
		return peer
	}
	mux := http.NewServeMux()
	mux.Handle(faultsPath, faults.Handler(key))
	mux.Handle("/", peer)
	return mux
}

// faultHooks plugs the test fault layer, when there is one, into the
// node's network: its HTTP dials, its Raft stream layer and its gossip
// transport.
func faultHooks(faults faultLayer) cluster.Hooks {
	if faults == nil {
		return cluster.Hooks{}
	}
	return cluster.Hooks{Dial: faults.DialContext, RaftStream: faults.StreamLayer, Gossip: faults.Memberlist}
}
