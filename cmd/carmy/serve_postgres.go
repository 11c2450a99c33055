package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy/embed"
	"github.com/carmyhq/carmy/store/postgres"
)

// A node with --store postgres://… is one of a fleet (docs/operations.md#a-fleet-on-postgresql): it runs
// no Raft and no gossip; its records, their bounds, the nodes' heartbeats
// and the cancellations live in the database (postgres.Fleet). The rest —
// the API, MCP and the gateway, the console, quotas, dedupe windows,
// probes — is the same node as with Raft. A key=value connection string
// ("host=/run/postgresql user=carmy dbname=carmy") names the database as
// well as a URL.

// usesPostgres reports whether --store names a PostgreSQL database: a
// postgres:// URL or a key=value connection string ("host=/run/postgresql
// user=carmy dbname=carmy"), the two forms pgx takes.
func (c serveConfig) usesPostgres() bool {
	return postgres.IsURLDSN(c.Store) || postgres.IsKeyValueDSN(c.Store)
}

// validateStore checks --store and what goes with it.
func (c serveConfig) validateStore() error {
	if !c.usesPostgres() {
		if c.Store != storeRaft {
			// Not the value: it may hold a password in a form not parsed.
			return errors.New("--store: must be raft, a postgres:// URL or a key=value connection string")
		}
		return nil
	}
	if _, err := url.Parse(c.Store); err != nil && postgres.IsURLDSN(c.Store) {
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

// redactedStore is --store fit for a message or the log: every password
// of a URL or a key=value connection string replaced (postgres.RedactDSN).
func redactedStore(s string) string {
	if s == storeRaft {
		return s
	}
	return postgres.RedactDSN(s)
}

// postgresNode completes nc for a fleet node: API TLS, the listener and
// the address the node advertises, the fleet's pool (the URL or key=value
// string parsed: TLS and the rest as it says; the password from
// --store-password-file when given). Nothing connects yet.
func postgresNode(ctx context.Context, cfg serveConfig, nc *embed.Config, log *slog.Logger) (func(*embed.Node), error) {
	apiKeys, err := cfg.apiTLS(log)
	if err != nil {
		return nil, err
	}
	warnPlainAPI(cfg, apiKeys, log)
	pc, err := pgxpool.ParseConfig(cfg.Store)
	if err != nil {
		// pgx's message quotes --store, its passwords redacted only as far
		// as a pattern finds them: not repeated.
		return nil, fmt.Errorf("--store %s: not a PostgreSQL connection string pgx can use", redactedStore(cfg.Store))
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
	ln, err := listen(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	nc.Listener = ln
	if apiKeys != nil {
		nc.API.TLS = apiKeys.ServerConfig()
	}
	nc.Postgres.Pool = pc
	nc.Postgres.Fleet.HTTPAddr = advertised(cfg.HTTPAddr, ln.Addr())
	return func(node *embed.Node) {
		auth := nc.API.Auth
		log.Info("starting carmy", slog.String("version", version), slog.String("node_id", cfg.NodeID),
			slog.String("store", redactedStore(cfg.Store)), slog.Duration("lease", node.Fleet().Lease()),
			slog.Int("tools", len(nc.Runtime.Tools())), slog.Int("mcp_servers", len(nc.Upstreams)), slog.Bool("auth", auth.Enabled()),
			slog.Bool("api_tls", apiKeys != nil), slog.Int("max_entries", nc.Postgres.Store.Capacity), slog.Int64("max_bytes", nc.Postgres.Store.MaxBytes),
			slog.Int("max_running_per_principal", nc.Runtime.Config().MaxRunningPerPrincipal), slog.Int("entries_per_principal", auth.MaxEntriesPerPrincipal),
			slog.Int64("bytes_per_principal", auth.MaxBytesPerPrincipal))
	}, nil
}
