package main

import (
	"log/slog"
	"os"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/embed"
	"github.com/carmyhq/carmy/internal/tlsmux"
	"github.com/carmyhq/carmy/store/postgres"
)

// settings turns the flags into the node's settings (embed.Settings):
// the config file fc, the limits and access flags, and the backend as the
// flags give it (addresses, join, snapshots, retention; a fleet's lease).
// The node security material, the listener and, for a fleet, the
// database's pool are added to the Config embed.NewConfig returns.
func (c serveConfig) settings(fc *embed.FileConfig, log *slog.Logger) embed.Settings {
	s := embed.Settings{
		File: fc, NodeID: c.NodeID, DataDir: c.DataDir, Logger: log, Getenv: os.Getenv,
		Dev: c.Dev, NoPreviousExecutions: c.fresh, HTTPAddr: c.HTTPAddr,
		MaxEntries: c.MaxEntries, MaxInflightBytes: c.MaxInflightBytes, Pprof: c.Pprof,
		AllowedHosts: c.AllowedHosts, TrustedProxies: c.TrustedProxies, PublicURL: c.PublicURL,
	}
	if c.MaxBytesSet {
		s.MaxBytes = c.MaxBytes // else limits.max_bytes, else the default
	}
	retention, _ := parseRetention(c.Retention) // validated
	if c.usesPostgres() {
		s.Postgres = &embed.PostgresConfig{
			Fleet: postgres.FleetConfig{NodeID: c.NodeID, Version: version, Lease: c.StoreLease, Retention: retention},
		}
		return s
	}
	s.Raft = &cluster.Config{
		NodeID: c.NodeID, DataDir: c.DataDir, RaftAddr: c.RaftAddr, GossipAddr: c.GossipAddr,
		Bootstrap: c.Bootstrap,
		// The named founder waits until its peers answer; others join.
		BootstrapUnlessCluster: c.BootstrapNode != "" && c.BootstrapNode == c.NodeID,
		Join:                   c.joinAddrs(),
		Retention:              retention,
		SnapshotThreshold:      c.SnapshotThreshold, SnapshotInterval: c.SnapshotInterval, RaftLog: c.RaftLog,
		Fast: c.FastFailover, Logger: log,
	}
	return s
}

// warnPlainAPI warns of a plain-HTTP API off loopback outside --dev.
func warnPlainAPI(cfg serveConfig, apiKeys *tlsmux.KeyPair, log *slog.Logger) {
	if apiKeys == nil && !cfg.Dev && !carmy.IsLoopback(cfg.HTTPAddr) {
		log.Warn("the API is plain HTTP off loopback: tokens and results cross the network in the clear; give --tls-cert and --tls-key",
			slog.String("http_addr", cfg.HTTPAddr))
	}
}
