package main

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/internal/tlsmux"
)

// security is what protects the node's listeners, as the flags give it.
type security struct {
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
	warnPlainAPI(cfg, apiKeys, log)
	return security{clusterKey: clusterKey, gossipKeys: gossipKeys, nodeTLS: nodeTLS, apiKeys: apiKeys}, nil
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
