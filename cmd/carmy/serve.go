package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/internal/faultnet"
	"github.com/carmyhq/carmy/internal/tlsmux"
	"github.com/carmyhq/carmy/mcpgateway"
)

// serve runs `carmy serve` until ctx is done: it reads the flags and the
// config file, builds the runtime, listens, opens the cluster node, and
// serves the API until ctx ends, then shuts down. Each step is a function
// below, in that order.
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
	log := newLogger(cfg, stderr)
	if cfg.usesPostgres() {
		return servePostgres(ctx, cfg, log)
	}
	fc, auth, err := loadConfigAndAuth(cfg, log)
	if err != nil {
		return err
	}
	lim, err := resolveLimits(cfg, fc)
	if err != nil {
		return err
	}
	auth.MaxEntriesPerPrincipal, auth.MaxBytesPerPrincipal = lim.entriesPerPrincipal, lim.bytesPerPrincipal
	app, err := buildRuntime(cfg, fc, lim, log)
	if err != nil {
		return err
	}
	ups, err := fc.mcpUpstreams(app, os.Getenv, cfg.DataDir, log)
	if err != nil {
		return err
	}
	var dir *mcpgateway.Directory // their resources and prompts, for /mcp
	if len(ups) > 0 {
		dir = mcpgateway.NewDirectory(ups)
	}
	sec, err := loadSecurity(cfg, log)
	if err != nil {
		return err
	}
	ln, err := listen(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer ln.Close()
	faults := newFaults(os.Getenv, log)
	if faults != nil {
		ln = faults.Listener(ln)
	}
	node, err := startCluster(cfg, lim, sec, ln, faults, app, log)
	if err != nil {
		return err
	}
	// Deferred after the listener's Close: runs once serving (and the
	// runtime's drain) is over.
	closeUpstreams, err := startUpstreams(ctx, ups)
	if err != nil {
		node.Close()
		return err
	}
	defer closeUpstreams()
	log.Info("starting carmy", slog.String("version", version), slog.String("node_id", cfg.NodeID),
		slog.Int("tools", len(app.Tools())), slog.Int("mcp_servers", len(ups)), slog.Bool("auth", auth.Enabled()), slog.Bool("gossip_encrypted", len(sec.gossipKeys) > 0 || sec.clusterKey != ""),
		slog.Bool("node_tls", sec.nodeTLS != nil), slog.Bool("api_tls", sec.apiKeys != nil),
		slog.Int("max_entries", cfg.MaxEntries), slog.Int64("max_bytes", lim.maxBytes),
		slog.Int("max_running_per_principal", lim.runningShare), slog.Int("entries_per_principal", lim.entriesPerPrincipal),
		slog.Int64("bytes_per_principal", lim.bytesPerPrincipal),
		slog.String("data_dir", cfg.DataDir))
	apiCfg := apiConfig(cfg, fc, auth, sec, node, faults, log)
	if dir != nil {
		apiCfg.MCPUpstreams = dir
	}
	return serveUntilDone(ctx, app, node, ln, apiCfg, log)
}

// loadConfigAndAuth reads the config file and its auth section (none with
// --dev), and refuses anonymous callers unless every listener is on
// loopback.
func loadConfigAndAuth(cfg serveConfig, log *slog.Logger) (fileConfig, api.Auth, error) {
	fc, err := loadConfig(cfg.ConfigPath)
	if err != nil {
		return fileConfig{}, api.Auth{}, err
	}
	var auth api.Auth
	if cfg.Dev {
		log.Warn("dev mode: demo tools on, auth off; do not expose this node")
	} else if auth, err = fc.auth(os.Getenv); err != nil {
		return fileConfig{}, api.Auth{}, err
	}
	if o := auth.OAuth; o != nil {
		log.Info("accepting OAuth access tokens", slog.String("issuer", o.Issuer), slog.String("audience", o.Audience), slog.String("jwks_url", o.JWKSURL))
	}
	if !auth.Enabled() && !cfg.Dev {
		// Anonymous callers only when every listener is on loopback.
		for _, l := range []struct{ flag, addr string }{
			{"--http-addr", cfg.HTTPAddr}, {"--raft-addr", cfg.RaftAddr}, {"--gossip-addr", cfg.GossipAddr},
		} {
			if !carmy.IsLoopback(l.addr) {
				return fileConfig{}, api.Auth{}, fmt.Errorf("refusing to start: %s %s is not a loopback address and no auth tokens are configured "+
					"(add auth.tokens to the config file, bind to 127.0.0.1, or use --dev to try it out)", l.flag, l.addr)
			}
		}
	}
	return fc, auth, nil
}

// buildRuntime returns the runtime with the limits of the config file and
// its tools: the demo tools with --dev or demo_tools, and the HTTP tools
// it declares.
func buildRuntime(cfg serveConfig, fc fileConfig, lim limits, log *slog.Logger) (*carmy.Runtime, error) {
	opts := []carmy.Option{carmy.WithNodeID(cfg.NodeID), carmy.WithLogger(log)}
	if fc.Limits.ResultBytes > 0 {
		opts = append(opts, carmy.WithMaxResultBytes(fc.Limits.ResultBytes))
	}
	switch {
	case cfg.MaxInflightBytes > 0:
		opts = append(opts, carmy.WithMaxInflightBytes(cfg.MaxInflightBytes))
	case cfg.MaxInflightBytes < 0:
		opts = append(opts, carmy.WithMaxInflightBytes(0))
	}
	if fc.Limits.MaxRunning > 0 {
		opts = append(opts, carmy.WithMaxRunning(fc.Limits.MaxRunning))
	}
	if lim.runningShare > 0 {
		opts = append(opts, carmy.WithMaxRunningPerPrincipal(lim.runningShare))
	}
	app := carmy.App(opts...)
	if cfg.Dev || fc.DemoTools {
		if err := app.AddDemoTools(); err != nil {
			return nil, err
		}
	}
	specs, err := fc.toolSpecsLogging(os.Getenv, log)
	if err != nil {
		return nil, err
	}
	for _, spec := range specs {
		if err := app.AddTool(spec); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	return app, nil
}

// security is what protects the node's listeners, as the flags give it.
type security struct {
	retention  time.Duration
	clusterKey string
	gossipKeys [][]byte
	nodeTLS    *cluster.NodeTLS
	apiKeys    *tlsmux.KeyPair
}

// loadSecurity reads the cluster key (generating one in the data dir when
// none is given and there is no node TLS), the gossip keys, node TLS and
// API TLS files, and refuses (or, with --insecure, warns of) Raft or
// gossip off loopback without node TLS and a gossip key (one derived from
// the cluster key counts); it warns of a plain-HTTP API off loopback.
func loadSecurity(cfg serveConfig, log *slog.Logger) (security, error) {
	retention, _ := parseRetention(cfg.Retention)
	gossipKeys, _ := parseGossipKeys(cfg.GossipKey)
	if cfg.GossipKeyFile != "" {
		text, err := readKeyFile("gossip-key-file", cfg.GossipKeyFile)
		if err != nil {
			return security{}, err
		}
		if gossipKeys, err = parseGossipKeys(text); err != nil {
			return security{}, fmt.Errorf("--gossip-key-file %s: %w", cfg.GossipKeyFile, err)
		}
	}
	nodeTLS, err := cfg.nodeTLS()
	if err != nil {
		return security{}, err
	}
	clusterKey, err := resolveClusterKey(cfg, nodeTLS != nil, log)
	if err != nil {
		return security{}, err
	}
	// Without a gossip key, the cluster derives one from the cluster key.
	if err := checkNodeSecurity(cfg, nodeTLS != nil, len(gossipKeys) > 0 || clusterKey != "", log); err != nil {
		return security{}, err
	}
	apiKeys, err := cfg.apiTLS(log)
	if err != nil {
		return security{}, err
	}
	if apiKeys == nil && !cfg.Dev && !carmy.IsLoopback(cfg.HTTPAddr) {
		log.Warn("the API is plain HTTP off loopback: tokens and results cross the network in the clear; give --tls-cert and --tls-key",
			slog.String("http_addr", cfg.HTTPAddr))
	}
	return security{retention: retention, clusterKey: clusterKey, gossipKeys: gossipKeys, nodeTLS: nodeTLS, apiKeys: apiKeys}, nil
}

// listen binds the API's address, once the node's names resolve. The
// listener comes first: the node advertises the address actually bound.
func listen(ctx context.Context, cfg serveConfig, log *slog.Logger) (net.Listener, error) {
	// A name of this node's may appear in DNS only after it starts (a pod
	// under a headless Service): wait for it rather than fail to bind.
	if err := waitResolvable(ctx, log, net.DefaultResolver.LookupHost, resolveWait, cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.HTTPAddr, err)
	}
	return ln, nil
}

// startCluster opens this node's cluster member and makes its replicated
// store the runtime's, with the cluster's view of which runners are gone.
func startCluster(cfg serveConfig, lim limits, sec security, ln net.Listener, faults *faultnet.Filter, app *carmy.Runtime, log *slog.Logger) (*cluster.Node, error) {
	nodeTLS, gossipKeys, retention := sec.nodeTLS, sec.gossipKeys, sec.retention
	node, err := cluster.Open(cluster.Config{
		NodeID:     cfg.NodeID,
		DataDir:    cfg.DataDir,
		RaftAddr:   cfg.RaftAddr,
		GossipAddr: cfg.GossipAddr,
		HTTPAddr:   advertised(cfg.HTTPAddr, ln.Addr()),
		Bootstrap:  cfg.Bootstrap,
		// The named founder waits until its peers answer; others join.
		BootstrapUnlessCluster: cfg.BootstrapNode != "" && cfg.BootstrapNode == cfg.NodeID,
		Join:                   cfg.joinAddrs(),
		ClusterKey:             sec.clusterKey,
		GossipKeys:             gossipKeys,
		TLS:                    nodeTLS,
		MaxEntries:             cfg.MaxEntries,
		MaxBytes:               lim.maxBytes,
		Retention:              retention,
		SnapshotThreshold:      cfg.SnapshotThreshold,
		SnapshotInterval:       cfg.SnapshotInterval,
		Fast:                   cfg.FastFailover,
		Logger:                 log,
		Hooks:                  faultHooks(faults),
		Metrics:                app.Metrics(),
	})
	if err != nil {
		return nil, err
	}
	st := node.Store()
	app.IdempotencyStore(st)
	app.SetLiveness(st)
	// One node probes at a time: the leader (SPEC §3.3).
	app.SetProbeOwner(node.IsLeader)
	return node, nil
}

// apiConfig is the API's configuration: auth and limits from the config
// file, the cluster's administration and internal endpoints, and TLS.
func apiConfig(cfg serveConfig, fc fileConfig, auth api.Auth, sec security, node *cluster.Node, faults *faultnet.Filter, log *slog.Logger) api.Config {
	apiCfg := api.Config{
		Auth: auth, BodyLimit: fc.Limits.BodyBytes, Timeouts: fc.Limits.timeouts(), Logger: log,
		RateLimit: api.RateLimit{PerSecond: fc.Limits.RatePerPrincipal, Burst: fc.Limits.RateBurst},
		Cluster:   clusterAdmin{node}, Internal: withFaultControl(node.InternalHandler(), faults, sec.clusterKey),
		NodeTLS: node.ServerTLSConfig(),
	}
	if sec.apiKeys != nil {
		apiCfg.TLS = sec.apiKeys.ServerConfig()
	}
	apiCfg.AuthFailures = fc.Limits.authFailures()
	apiCfg.Pprof = cfg.Pprof
	acc := resolveAccess(cfg, fc)
	apiCfg.AllowedHosts, apiCfg.OwnHosts, apiCfg.TrustedProxies, apiCfg.PublicURL = acc.allowedHosts, acc.ownHosts, acc.trustedProxies, acc.publicURL
	return apiCfg
}

// serveUntilDone serves the API on ln until ctx is done, then stops: on
// SIGTERM a leader hands leadership over first, while its API still
// serves forwarded writes; then the runtime drains and the node closes.
func serveUntilDone(ctx context.Context, app *carmy.Runtime, node *cluster.Node, ln net.Listener, apiCfg api.Config, log *slog.Logger) error {
	serveCtx, stopServing := context.WithCancel(context.Background())
	defer stopServing()
	var stopAt atomic.Pointer[time.Time] // when ctx ended
	go func() {
		select {
		case <-ctx.Done():
			now := time.Now()
			stopAt.Store(&now)
			node.HandOff()
			stopServing()
		case <-serveCtx.Done(): // Serve returned on its own (an error)
		}
	}()
	serveErr := app.Serve(serveCtx, ln, apiCfg)
	// The node's shutdown is bounded by its ShutdownTimeout and, after a
	// signal, by what is left of SPEC's 15 s.
	closeCtx := context.Background()
	if at := stopAt.Load(); at != nil {
		var cancel context.CancelFunc
		closeCtx, cancel = context.WithDeadline(closeCtx, at.Add(stopBudget))
		defer cancel()
	}
	if err := node.CloseContext(closeCtx); errors.Is(err, cluster.ErrShutdownTimeout) {
		return fmt.Errorf("stopping: %w", err)
	} else if err != nil {
		log.Warn("closing the node", slog.Any("err", err))
	}
	if serveErr != nil {
		return serveErr
	}
	log.Info("stopped")
	return nil
}

// stopBudget is how long after a signal carmy serve may take to exit:
// SPEC §3's 15 s, less a margin for the process's own exit.
const stopBudget = 14 * time.Second

// faultsPath is where a node with the test fault layer serves its control.
const faultsPath = "/internal/v1/faults"

// withFaultControl returns internal, with the test fault layer's control
// endpoint at faultsPath when faults is not nil.
func withFaultControl(internal http.Handler, faults *faultnet.Filter, key string) http.Handler {
	if faults == nil {
		return internal
	}
	mux := http.NewServeMux()
	mux.Handle(faultsPath, faults.Handler(key))
	mux.Handle("/", internal)
	return mux
}

// faultHooks plugs the test fault layer, when there is one, into the
// node's network: its HTTP dials, its Raft stream layer and its gossip
// transport.
func faultHooks(faults *faultnet.Filter) cluster.Hooks {
	if faults == nil {
		return cluster.Hooks{}
	}
	return cluster.Hooks{Dial: faults.DialContext, RaftStream: faults.StreamLayer, Gossip: faults.Memberlist}
}

// advertised is the HTTP address other nodes reach this one at: the
// --http-addr as given, with the port actually bound when it was 0.
func advertised(flagAddr string, bound net.Addr) string {
	host, port, err := net.SplitHostPort(flagAddr)
	if err != nil || host == "" || port == "0" {
		_, bport, _ := net.SplitHostPort(bound.String())
		if host == "" {
			return bound.String()
		}
		return net.JoinHostPort(host, bport)
	}
	return flagAddr
}

// checkNodeSecurity refuses, outside --dev, Raft or gossip off loopback
// without node TLS and a gossip key: anyone who reaches those ports could
// otherwise append to the log or forge membership. --insecure lets the
// node start anyway, with a warning.
func checkNodeSecurity(cfg serveConfig, tls, gossipKey bool, log *slog.Logger) error {
	if cfg.Dev || (carmy.IsLoopback(cfg.RaftAddr) && carmy.IsLoopback(cfg.GossipAddr)) || (tls && gossipKey) {
		return nil
	}
	var missing []string
	if !tls {
		missing = append(missing, "node TLS (--node-tls-ca, --node-tls-cert, --node-tls-key; carmy tls makes them)")
	}
	if !gossipKey {
		missing = append(missing, "a gossip key (--gossip-key, or a --cluster-key it is derived from; carmy keygen makes one)")
	}
	if !cfg.Insecure {
		return fmt.Errorf("refusing to start: Raft (%s) or gossip (%s) listens off loopback without %s: "+
			"whoever reaches those ports could append to the log or forge membership; give them, or --insecure to accept that",
			cfg.RaftAddr, cfg.GossipAddr, strings.Join(missing, " and "))
	}
	log.Warn("INSECURE: Raft or gossip listens off loopback without "+strings.Join(missing, " and ")+
		"; anyone who reaches those ports can append to the log or forge membership (--insecure)",
		slog.String("raft_addr", cfg.RaftAddr), slog.String("gossip_addr", cfg.GossipAddr))
	return nil
}
