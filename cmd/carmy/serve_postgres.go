package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/store/postgres"
)

// A node with --store postgres://… is one of a fleet (SPEC §8): it runs
// no Raft and no gossip; its records, their bounds, the nodes' heartbeats
// and the cancellations live in the database (postgres.Fleet). The rest —
// the API, MCP and the gateway, the console, quotas, dedupe windows,
// probes — is the same node as with Raft.

// usesPostgres reports whether --store names a PostgreSQL URL.
func (c serveConfig) usesPostgres() bool {
	return strings.HasPrefix(c.Store, "postgres://") || strings.HasPrefix(c.Store, "postgresql://")
}

// validateStore checks --store and what goes with it.
func (c serveConfig) validateStore() error {
	if !c.usesPostgres() {
		if c.Store != storeRaft {
			return fmt.Errorf("--store %q: must be raft or a postgres:// URL", redactedStore(c.Store))
		}
		return nil
	}
	if _, err := url.Parse(c.Store); err != nil {
		return fmt.Errorf("--store: not a URL: %s", redactedStore(c.Store))
	}
	switch {
	case c.Bootstrap && !c.Dev:
		return errors.New("--bootstrap makes no sense with --store postgres: the nodes of a fleet share the database and form no cluster")
	case c.Join != "" || c.BootstrapNode != "":
		return errors.New("--join and --bootstrap-node make no sense with --store postgres: the nodes of a fleet share the database and form no cluster")
	case c.StoreLease < time.Second:
		return fmt.Errorf("--store-lease %s: at least 1s", c.StoreLease)
	}
	return nil
}

// redactedStore is --store fit for a message or the log: a URL's
// password, and any password= parameter, replaced.
func redactedStore(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// servePostgres is serve for a fleet node: the same steps but the
// cluster's, then the fleet's.
func servePostgres(ctx context.Context, cfg serveConfig, log *slog.Logger) error {
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
	retention, _ := parseRetention(cfg.Retention)
	apiKeys, err := cfg.apiTLS(log)
	if err != nil {
		return err
	}
	if apiKeys == nil && !cfg.Dev && !carmy.IsLoopback(cfg.HTTPAddr) {
		log.Warn("the API is plain HTTP off loopback: tokens and results cross the network in the clear; give --tls-cert and --tls-key",
			slog.String("http_addr", cfg.HTTPAddr))
	}
	ln, err := listen(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer ln.Close()
	fleet, err := openFleet(cfg, lim, retention, advertised(cfg.HTTPAddr, ln.Addr()), log)
	if err != nil {
		return err
	}
	defer fleet.Close()
	app.IdempotencyStore(fleet)
	// One node probes at a time: the holder of the prober lock.
	app.SetProbeOwner(fleet.ProbeOwner)

	// The fleet runs until the API has stopped and the tools have
	// drained (their outcomes recorded). It gives up only on what
	// waiting cannot cure (tables newer than this build, a refused
	// migration): the node then stops with its error.
	serveCtx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	fleetCtx, stopFleet := context.WithCancel(context.Background())
	defer stopFleet()
	fleetDone := make(chan error, 1)
	go func() {
		err := fleet.Run(fleetCtx)
		if err != nil {
			stopServing()
		}
		fleetDone <- err
	}()

	closeUpstreams, err := startUpstreams(ctx, ups)
	if err != nil {
		return err
	}
	defer closeUpstreams()
	log.Info("starting carmy", slog.String("version", version), slog.String("node_id", cfg.NodeID),
		slog.String("store", redactedStore(cfg.Store)), slog.Duration("lease", fleet.Lease()),
		slog.Int("tools", len(app.Tools())), slog.Int("mcp_servers", len(ups)), slog.Bool("auth", auth.Enabled()),
		slog.Bool("api_tls", apiKeys != nil), slog.Int("max_entries", cfg.MaxEntries), slog.Int64("max_bytes", lim.maxBytes),
		slog.Int("max_running_per_principal", lim.runningShare), slog.Int("entries_per_principal", lim.entriesPerPrincipal),
		slog.Int64("bytes_per_principal", lim.bytesPerPrincipal))
	apiCfg := api.Config{
		Auth: auth, BodyLimit: fc.Limits.BodyBytes, Timeouts: fc.Limits.timeouts(), Logger: log,
		RateLimit:    api.RateLimit{PerSecond: fc.Limits.RatePerPrincipal, Burst: fc.Limits.RateBurst},
		Cluster:      fleetAdmin{fleet},
		AuthFailures: fc.Limits.authFailures(),
		Pprof:        cfg.Pprof,
	}
	if apiKeys != nil {
		apiCfg.TLS = apiKeys.ServerConfig()
	}
	acc := resolveAccess(cfg, fc)
	apiCfg.AllowedHosts, apiCfg.OwnHosts, apiCfg.TrustedProxies, apiCfg.PublicURL = acc.allowedHosts, acc.ownHosts, acc.trustedProxies, acc.publicURL
	serveErr := app.Serve(serveCtx, ln, apiCfg)
	stopFleet()
	if err := <-fleetDone; err != nil {
		return fmt.Errorf("the store: %w", err)
	}
	if serveErr != nil {
		return serveErr
	}
	log.Info("stopped")
	return nil
}

// openFleet makes the fleet node of --store: the URL parsed (TLS and the
// rest as it says), the password from --store-password-file when given.
// It does not connect.
func openFleet(cfg serveConfig, lim limits, retention time.Duration, httpAddr string, log *slog.Logger) (*postgres.Fleet, error) {
	pc, err := pgxpool.ParseConfig(cfg.Store)
	if err != nil {
		// pgx's message may quote the URL: say only where it is wrong.
		return nil, fmt.Errorf("--store %s: not a PostgreSQL URL pgx can use", redactedStore(cfg.Store))
	}
	if cfg.StorePasswordFile != "" {
		pw, err := readKeyFile("store-password-file", cfg.StorePasswordFile)
		if err != nil {
			return nil, err
		}
		pc.ConnConfig.Password = pw
	}
	if pc.ConnConfig.RuntimeParams["application_name"] == "" {
		pc.ConnConfig.RuntimeParams["application_name"] = "carmy " + cfg.NodeID
	}
	return postgres.NewFleet(pc, postgres.Config{Capacity: cfg.MaxEntries, MaxBytes: lim.maxBytes, Logger: log},
		postgres.FleetConfig{NodeID: cfg.NodeID, HTTPAddr: httpAddr, Version: version, Lease: cfg.StoreLease, Retention: retention, Logger: log})
}
