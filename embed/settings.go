package embed

import (
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/cluster"
)

// Settings is everything a node needs once its settings are merged: the
// config file (LoadConfig) and what carmy serve's flags and environment
// give. NewConfig applies the node's policy to them (docs/config.md,
// docs/security.md) and returns the Config StartNode takes, so that a
// program gets the same node as the binary from the same file.
//
// Raft or Postgres is the backend, exactly one: its fields as the caller
// gives them (addresses, join, keys, TLS, lease); NewConfig sets its
// bounds (store capacity, bytes), its audit settings, its data dir and its
// logger. The node security material (the cluster key, gossip keys, node
// and API TLS) is the caller's: it may be set here or on the Config
// NewConfig returns, before StartNode.
type Settings struct {
	// File is the config file's model (LoadConfig); nil is an empty file.
	File *FileConfig
	// NodeID is the node's id (carmy.WithNodeID; --node-id): its
	// records', its Raft member's, its fleet heartbeat's. Required.
	NodeID string
	// DataDir is the node's data directory (--data-dir): the Raft member's (when
	// Raft.DataDir is empty), and the parent of the working directories
	// of the config file's command MCP servers (<DataDir>/mcp/<name>).
	DataDir string
	// Logger is the node's logger; nil is slog.Default().
	Logger *slog.Logger
	// Getenv reads the variables the config file names (tokens, ${VAR}
	// in URLs, headers and env); nil is os.Getenv.
	Getenv func(string) string
	// Dev is carmy serve's --dev: the demo tools on, auth off (the file's
	// auth section is not read), no per-principal defaults.
	Dev bool
	// NoPreviousExecutions says no earlier process ran executions under
	// NodeID (carmy.WithNoPreviousExecutions; carmy serve tells it from a
	// fresh data dir).
	NoPreviousExecutions bool
	// HTTPAddr is the API's address as configured (carmy serve's
	// --http-addr): anonymous callers are refused unless it is on
	// loopback, and its host is one of the node's own names (the Host
	// check). Empty: the Listener's address.
	HTTPAddr string
	// Listener is where the node serves (Config.Listener); it may be left
	// nil and set on the Config before StartNode.
	Listener net.Listener
	// MaxEntries is the capacity of the store, in records (the leader's
	// applies; --max-entries); 0 is DefaultMaxEntries.
	MaxEntries int
	// MaxBytes bounds the bytes of the store's records (--max-bytes); 0:
	// the file's limits.max_bytes, else DefaultMaxBytes.
	MaxBytes int64
	// MaxInflightBytes bounds the bytes of arguments and results the
	// node's calls hold in flight: 0 sizes it from memory, a negative
	// value means no bound (carmy.WithMaxInflightBytes;
	// --max-inflight-bytes).
	MaxInflightBytes int64
	// Pprof serves /debug/pprof/ (api.Config.Pprof; --pprof).
	Pprof bool
	// AllowedHosts, TrustedProxies (comma-separated, as api.ParseAllowedHosts
	// and api.ParseTrustedProxies read them) and PublicURL, when set, win
	// over the file's api section (--allowed-hosts, --trusted-proxies,
	// --public-url).
	AllowedHosts   string
	TrustedProxies string
	PublicURL      string
	// Raft makes the node a member of a Raft cluster, Postgres one of a
	// fleet sharing a PostgreSQL database (--store): exactly one.
	Raft     *cluster.Config
	Postgres *PostgresConfig
}

// withDefaults fills what Settings leaves to a default.
func (s Settings) withDefaults() Settings {
	if s.File == nil {
		s.File = &FileConfig{}
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.Getenv == nil {
		s.Getenv = os.Getenv
	}
	if s.MaxEntries == 0 {
		s.MaxEntries = DefaultMaxEntries
	}
	if s.HTTPAddr == "" && s.Listener != nil {
		s.HTTPAddr = s.Listener.Addr().String()
	}
	return s
}

// validate checks what carmy serve's flags check before they become
// Settings (the errors name the setting).
func (s Settings) validate() error {
	switch {
	case s.NodeID == "":
		return fmt.Errorf("NewConfig: a NodeID is required")
	case (s.Raft == nil) == (s.Postgres == nil):
		return fmt.Errorf("NewConfig: exactly one of Raft and Postgres is required")
	case s.MaxEntries < 0:
		return fmt.Errorf("NewConfig: MaxEntries %d: must not be negative", s.MaxEntries)
	case s.MaxBytes < 0:
		return fmt.Errorf("NewConfig: MaxBytes %d: must not be negative", s.MaxBytes)
	}
	if _, err := api.ParseAllowedHosts(s.AllowedHosts); err != nil {
		return fmt.Errorf("NewConfig: AllowedHosts: %w", err)
	}
	if _, err := api.ParseTrustedProxies(s.TrustedProxies); err != nil {
		return fmt.Errorf("NewConfig: TrustedProxies: %w", err)
	}
	if err := api.ValidatePublicURL(s.PublicURL); err != nil {
		return fmt.Errorf("NewConfig: PublicURL: %w", err)
	}
	return nil
}

// OffLoopbackError is NewConfig's refusal of a node that would take
// anonymous callers (no auth configured, not Dev) on a listener off
// loopback.
type OffLoopbackError struct {
	// Flag names the listener by carmy serve's flag: --http-addr,
	// --raft-addr or --gossip-addr.
	Flag string
	// Addr is the listener's address.
	Addr string
}

func (e *OffLoopbackError) Error() string {
	return fmt.Sprintf("refusing to start: %s %s is not a loopback address and no auth tokens are configured "+
		"(add auth.tokens to the config file, bind to 127.0.0.1, or use --dev to try it out)", e.Flag, e.Addr)
}
