package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/embed"
	"github.com/carmyhq/carmy/internal/didyoumean"
	"github.com/carmyhq/carmy/internal/logbuf"
	"github.com/carmyhq/carmy/internal/tlsmux"
)

// serveConfig is everything `carmy serve` is told by flags and the
// environment.
type serveConfig struct {
	// NodeID is --node-id; "" when neither it nor CARMY_NODE_ID is given:
	// serve then takes the id kept in the data dir (resolveNodeID).
	NodeID string
	// NodeIDSet says whether --node-id (or its variable) was given, so
	// that an explicitly empty id is refused.
	NodeIDSet bool
	// fresh says that no earlier process ran executions under this
	// node's id (noPreviousExecutions); not a flag.
	fresh         bool
	DataDir       string
	HTTPAddr      string
	RaftAddr      string
	GossipAddr    string
	Bootstrap     bool
	BootstrapNode string
	Join          string
	ConfigPath    string
	Dev           bool
	MaxEntries    int
	// MaxBytes is --max-bytes (default embed.DefaultMaxBytes); MaxBytesSet says
	// whether the flag or its variable set it, so that limits.max_bytes
	// applies otherwise.
	MaxBytes          int64
	MaxBytesSet       bool
	Retention         string
	ClusterKey        string
	ClusterKeyFile    string
	GossipKey         string
	GossipKeyFile     string
	NodeTLSCA         string
	NodeTLSCert       string
	NodeTLSKey        string
	TLSCert           string
	TLSKey            string
	Insecure          bool
	FastFailover      bool
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	RaftLog           string
	LogFormat         string
	LogLevel          string
	// Pprof serves /debug/pprof/ (api.Config.Pprof).
	Pprof bool
	// AllowedHosts, TrustedProxies and PublicURL are the API's access
	// settings (embed.Settings); empty, the config file's api section applies.
	AllowedHosts   string
	TrustedProxies string
	PublicURL      string
	// MaxInflightBytes bounds the bytes of arguments and results the
	// node's calls hold in flight (engine.Config.MaxInflightBytes): 0
	// sizes it from memory, a negative value means no bound.
	MaxInflightBytes int64
	// Store is --store: "raft" (the built-in cluster) or a PostgreSQL URL
	// (a fleet: serve_postgres.go). StorePasswordFile and StoreLease go
	// with a URL.
	Store             string
	StorePasswordFile string
	StoreLease        time.Duration
}

// Defaults of docs/cli.md#carmy-serve (the node id's: nodeid.go).
const (
	defaultHTTPAddr   = "127.0.0.1:8080"
	defaultRaftAddr   = "127.0.0.1:8300"
	defaultGossipAddr = "127.0.0.1:8301"
	defaultMaxEntries = embed.DefaultMaxEntries
	defaultStore      = storeRaft
)

// storeRaft is the --store of the built-in Raft cluster.
const storeRaft = "raft"

// flagEnv pairs each flag with its environment variable.
var flagEnv = []struct{ flag, env string }{
	{"node-id", "CARMY_NODE_ID"},
	{"data-dir", "CARMY_DATA_DIR"},
	{"http-addr", "CARMY_HTTP_ADDR"},
	{"raft-addr", "CARMY_RAFT_ADDR"},
	{"gossip-addr", "CARMY_GOSSIP_ADDR"},
	{"bootstrap", "CARMY_BOOTSTRAP"},
	{"bootstrap-node", "CARMY_BOOTSTRAP_NODE"},
	{"join", "CARMY_JOIN"},
	{"config", "CARMY_CONFIG"},
	{"max-entries", "CARMY_MAX_ENTRIES"},
	{"max-bytes", "CARMY_MAX_BYTES"},
	{"retention", "CARMY_RETENTION"},
	{"cluster-key", "CARMY_CLUSTER_KEY"},
	{"cluster-key-file", "CARMY_CLUSTER_KEY_FILE"},
	{"gossip-key", "CARMY_GOSSIP_KEY"},
	{"gossip-key-file", "CARMY_GOSSIP_KEY_FILE"},
	{"node-tls-ca", "CARMY_NODE_TLS_CA"},
	{"node-tls-cert", "CARMY_NODE_TLS_CERT"},
	{"node-tls-key", "CARMY_NODE_TLS_KEY"},
	{"tls-cert", "CARMY_TLS_CERT"},
	{"tls-key", "CARMY_TLS_KEY"},
	{"insecure", "CARMY_INSECURE"},
	{"fast-failover", "CARMY_FAST_FAILOVER"},
	{"snapshot-threshold", "CARMY_SNAPSHOT_THRESHOLD"},
	{"raft-log", "CARMY_RAFT_LOG"},
	{"snapshot-interval", "CARMY_SNAPSHOT_INTERVAL"},
	{"log-format", "CARMY_LOG_FORMAT"},
	{"log-level", "CARMY_LOG_LEVEL"},
	{"pprof", "CARMY_PPROF"},
	{"allowed-hosts", "CARMY_ALLOWED_HOSTS"},
	{"trusted-proxies", "CARMY_TRUSTED_PROXIES"},
	{"public-url", "CARMY_PUBLIC_URL"},
	{"max-inflight-bytes", "CARMY_MAX_INFLIGHT_BYTES"},
	{"store", "CARMY_STORE"},
	{"store-password-file", "CARMY_STORE_PASSWORD_FILE"},
	{"store-lease", "CARMY_STORE_LEASE"},
}

func serveFlags(cfg *serveConfig, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("carmy serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.NodeID, "node-id", "", "unique, stable `name` of this node (Raft id, gossip name, node_id in records); without one, the id kept in <data-dir>/node-id, generated (node-<8 hex digits>) on first start")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "`dir` of the Raft log, stable store and snapshots (default ./carmy-data/<node-id>; without --node-id, ./carmy-data/default, or ./carmy-data/node1 when that exists)")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", defaultHTTPAddr, "`host:port` of the HTTP API (port 0 picks a free one)")
	fs.StringVar(&cfg.RaftAddr, "raft-addr", defaultRaftAddr, "`host:port` of the Raft transport")
	fs.StringVar(&cfg.GossipAddr, "gossip-addr", defaultGossipAddr, "`host:port` of memberlist gossip (TCP and UDP)")
	fs.BoolVar(&cfg.Bootstrap, "bootstrap", false, "start a new cluster with this node as its only voter when the data dir is empty")
	fs.StringVar(&cfg.BootstrapNode, "bootstrap-node", "", "`id` of the node that founds the cluster: with this --node-id and an empty data dir, it does once every other --join address answers with no cluster state (else it joins); one command line for every node")
	fs.StringVar(&cfg.Join, "join", "", "comma-separated HTTP `addresses` of members to ask to add this node")
	fs.StringVar(&cfg.ConfigPath, "config", "", "YAML `file` declaring tools, auth tokens and limits")
	fs.BoolVar(&cfg.Dev, "dev", false, "try-it-out mode: demo tools on, auth off, and --bootstrap unless --join is given")
	fs.IntVar(&cfg.MaxEntries, "max-entries", defaultMaxEntries, "capacity of the replicated store, in records (the leader's value applies)")
	fs.Int64Var(&cfg.MaxBytes, "max-bytes", embed.DefaultMaxBytes, "bound on the bytes of the replicated store's records (keys, ids, fingerprints, results; the leader's value applies); unset, limits.max_bytes applies when the config file sets it")
	fs.StringVar(&cfg.Retention, "retention", "off", "`age` after which finished records are removed, e.g. 72h or 30d; off keeps them")
	fs.StringVar(&cfg.ClusterKey, "cluster-key", "", "shared `secret` of 16 bytes or more that authenticates every node-to-node call and, without node TLS, every Raft connection; the same on every node. With none and no node TLS, the node generates one in <data-dir>/cluster-key, and other nodes join with --cluster-key-file and a copy of it")
	fs.StringVar(&cfg.ClusterKeyFile, "cluster-key-file", "", "`file` holding the cluster key: its text, surrounding whitespace trimmed; instead of --cluster-key")
	fs.StringVar(&cfg.GossipKey, "gossip-key", "", "base64 `keys` (16, 24 or 32 bytes; carmy keygen makes one) that encrypt gossip; the first encrypts, any decrypts (comma-separated, for rotation). Without one, gossip is encrypted with a key derived from the cluster key")
	fs.StringVar(&cfg.GossipKeyFile, "gossip-key-file", "", "`file` holding the value of --gossip-key, surrounding whitespace trimmed; instead of --gossip-key")
	fs.StringVar(&cfg.NodeTLSCA, "node-tls-ca", "", "PEM `file` of the cluster CA: Raft and node-to-node HTTP are mutual TLS, and a peer whose certificate does not chain to it is refused (carmy tls makes one)")
	fs.StringVar(&cfg.NodeTLSCert, "node-tls-cert", "", "PEM `file` of this node's certificate (with --node-tls-ca); reloaded when it changes")
	fs.StringVar(&cfg.NodeTLSKey, "node-tls-key", "", "PEM `file` of this node's key (with --node-tls-ca)")
	fs.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM `file` of the API's certificate (chain): the API is served over HTTPS only; reloaded when it changes")
	fs.StringVar(&cfg.TLSKey, "tls-key", "", "PEM `file` of the API certificate's key (with --tls-cert)")
	fs.BoolVar(&cfg.Insecure, "insecure", false, "let Raft or gossip listen off loopback without node TLS and a gossip key (logged as a warning)")
	fs.BoolVar(&cfg.FastFailover, "fast-failover", false, "short Raft and gossip timeouts (sub-second failover), for loopback and tests")
	fs.Int64Var(&cfg.MaxInflightBytes, "max-inflight-bytes", 0, "bound on the `bytes` of arguments and results this node's calls hold in flight; past it a new call is refused 503 before anything is reserved. 0 sizes it from memory (a 64th of the Go memory limit, the cgroup's or the host's memory, within 16–64 MiB); negative: no bound")
	fs.StringVar(&cfg.Store, "store", defaultStore, "where records live: raft (the nodes' own replicated log) or a PostgreSQL `URL` (postgres://user@host:5432/db?sslmode=verify-full) or key=value connection string (host=/run/postgresql user=carmy dbname=carmy): the nodes then run no Raft and no gossip and share the database. Its password comes from --store-password-file, PGPASSWORD or PGPASSFILE (one in the URL shows in ps); it is never logged")
	fs.StringVar(&cfg.StorePasswordFile, "store-password-file", "", "`file` holding the PostgreSQL password of --store, surrounding whitespace trimmed")
	fs.DurationVar(&cfg.StoreLease, "store-lease", 10*time.Second, "with --store postgres: how long a node's heartbeat holds; a node silent longer is dead and its running executions become interrupted (within 3/2 of it)")
	fs.Uint64Var(&cfg.SnapshotThreshold, "snapshot-threshold", 8192, "log entries between Raft snapshots")
	fs.DurationVar(&cfg.SnapshotInterval, "snapshot-interval", 2*time.Minute, "how often Raft checks whether to snapshot")
	fs.StringVar(&cfg.RaftLog, "raft-log", "wal", "where the Raft log is kept: wal (segment files in the data dir's raft-log/, one sync per append; a log in raft.db is moved there at the first start) or bolt (raft.db, as before the WAL)")
	fs.StringVar(&cfg.LogFormat, "log-format", "text", "log format: text or json (one object per line)")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&cfg.AllowedHosts, "allowed-hosts", "", "comma-separated Host `names` the API answers besides IP addresses, localhost and the host of --http-addr (*.example.com for every name under it; * turns the check off). The check guards against DNS rebinding: on with auth off, and with auth on once this is given; other names get 421. Unset, api.allowed_hosts of the config file applies")
	fs.StringVar(&cfg.TrustedProxies, "trusted-proxies", "", "comma-separated `CIDRs` of reverse proxies whose X-Forwarded-For is believed: the failed-authentication lockout keys on the client address they report. Unset, api.trusted_proxies of the config file applies; none by default")
	fs.StringVar(&cfg.PublicURL, "public-url", "", "base `URL` clients reach the node at (https://carmy.example.com), named by the /mcp metadata document and its 401s; unset, api.public_url of the config file, else the listener's own address")
	fs.BoolVar(&cfg.Pprof, "pprof", false, "serve Go profiles under /debug/pprof/ (admin token when auth is on; anyone on loopback when off, logged as a warning)")
	fs.Usage = func() {
		fmt.Fprint(out, `Usage: carmy serve [flags]

Runs a Carmy node. Every flag may also be set by its environment variable;
a flag on the command line wins.

Flags:
`)
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			line := "  --" + f.Name
			if name != "" {
				line += " " + name
			}
			fmt.Fprintf(out, "%-28s %s", line, usage)
			if def, ok := shownDefaults[f.Name]; ok {
				fmt.Fprintf(out, " (default %s)", def)
			} else if f.DefValue != "" && f.DefValue != "false" {
				fmt.Fprintf(out, " (default %s)", f.DefValue)
			}
			if env := envOf(f.Name); env != "" {
				fmt.Fprintf(out, " [$%s]", env)
			}
			fmt.Fprintln(out)
		})
		fmt.Fprint(out, `
Without tokens in the config file every caller is "anonymous", which is
allowed only when --http-addr is a loopback address (or with --dev).
Tokens are read from the environment and must be at least 16 bytes:
carmy keygen prints a random one (32 bytes, base64), for a token as for
--gossip-key.

Examples:
  carmy serve --dev
  CARMY_CONFIG=/etc/carmy/carmy.yaml carmy serve --node-id n1 --http-addr n1.internal:8080 \
    --raft-addr n1.internal:8300 --gossip-addr n1.internal:8301 --join n2.internal:8080

Bind each listener to the node's own address or name, not 0.0.0.0: the
node advertises what it binds (docs/operations.md, "Addresses").
`)
	}
	return fs
}

// shownDefaults are defaults the help shows for flags whose zero value
// means something computed at start.
var shownDefaults = map[string]string{"cluster-key": "generated", "node-id": "generated, kept in <data-dir>/node-id"}

func envOf(flagName string) string {
	for _, fe := range flagEnv {
		if fe.flag == flagName {
			return fe.env
		}
	}
	return ""
}

// wantsHelp reports whether args ask for the usage (-h, -help or --help
// before any "--"), which then goes to standard output.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help", "--h":
			return true
		}
	}
	return false
}

// parseServe fills a serveConfig from the environment, then args.
func parseServe(args []string, getenv func(string) string, out io.Writer) (serveConfig, error) {
	var cfg serveConfig
	fs := serveFlags(&cfg, out)
	for _, fe := range flagEnv {
		if v := getenv(fe.env); v != "" {
			if err := fs.Set(fe.flag, v); err != nil {
				return cfg, fmt.Errorf("$%s: %w", fe.env, err)
			}
		}
	}
	// The flag package prints nothing of its own: --help prints the usage;
	// a wrong flag gets one line naming it (and the flag meant) and a
	// pointer to the usage, not the usage itself.
	usage := fs.Usage
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return cfg, flag.ErrHelp
		}
		fmt.Fprintf(out, "carmy serve: %s\nRun 'carmy serve --help' for the flags.\n", didyoumean.FlagError(err, fs))
		return cfg, errUsage
	}
	fs.Visit(func(f *flag.Flag) {
		cfg.MaxBytesSet = cfg.MaxBytesSet || f.Name == "max-bytes"
		cfg.NodeIDSet = cfg.NodeIDSet || f.Name == "node-id"
	})
	if fs.NArg() > 0 {
		fmt.Fprintf(out, "carmy serve: unexpected argument %q\n", fs.Arg(0))
		return cfg, errUsage
	}
	if cfg.DataDir == "" {
		cfg.DataDir = defaultDataDir(cfg.NodeID)
	}
	if cfg.Dev && cfg.Join == "" && cfg.BootstrapNode == "" {
		// --dev starts a cluster of its own, unless it joins one.
		cfg.Bootstrap = true
	}
	return cfg, cfg.validate()
}

func (c serveConfig) validate() error {
	switch {
	case (c.NodeIDSet || c.NodeID != "") && checkNodeID(c.NodeID) != nil:
		return fmt.Errorf("--node-id %q: must be non-empty, without spaces or slashes", c.NodeID)
	case c.MaxEntries <= 0:
		return fmt.Errorf("--max-entries %d: must be positive", c.MaxEntries)
	case c.MaxBytes <= 0:
		return fmt.Errorf("--max-bytes %d: must be positive", c.MaxBytes)
	case c.Bootstrap && c.BootstrapNode != "":
		return fmt.Errorf("--bootstrap and --bootstrap-node exclude each other: --bootstrap-node names the founder for every node")
	case c.BootstrapNode != "" && strings.ContainsAny(c.BootstrapNode, " \t\r\n/"):
		return fmt.Errorf("--bootstrap-node %q: must be a node id, without spaces or slashes", c.BootstrapNode)
	case c.Bootstrap && c.Join != "":
		return fmt.Errorf("--bootstrap and --join exclude each other: bootstrap starts a new cluster, join enters an existing one")
	case c.SnapshotThreshold == 0:
		return fmt.Errorf("--snapshot-threshold must be positive")
	case c.SnapshotInterval <= 0:
		return fmt.Errorf("--snapshot-interval must be positive")
	case c.RaftLog != "wal" && c.RaftLog != "bolt":
		return fmt.Errorf("--raft-log %q: must be wal or bolt", c.RaftLog)
	case c.LogFormat != "text" && c.LogFormat != "json":
		return fmt.Errorf("--log-format %q: must be text or json", c.LogFormat)
	}
	for _, a := range [][2]string{{"http-addr", c.HTTPAddr}, {"raft-addr", c.RaftAddr}, {"gossip-addr", c.GossipAddr}} {
		if err := checkListenAddr(a[0], a[1]); err != nil {
			return err
		}
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if err := c.validateStore(); err != nil {
		return err
	}
	if c.ClusterKey != "" && c.ClusterKeyFile != "" {
		return fmt.Errorf("--cluster-key and --cluster-key-file exclude each other: give the key one way")
	}
	if c.GossipKey != "" && c.GossipKeyFile != "" {
		return fmt.Errorf("--gossip-key and --gossip-key-file exclude each other: give the keys one way")
	}
	if _, err := parseGossipKeys(c.GossipKey); err != nil {
		return err
	}
	if _, err := parseRetention(c.Retention); err != nil {
		return err
	}
	if _, err := api.ParseAllowedHosts(c.AllowedHosts); err != nil {
		return fmt.Errorf("--allowed-hosts: %w", err)
	}
	if _, err := api.ParseTrustedProxies(c.TrustedProxies); err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	if err := api.ValidatePublicURL(c.PublicURL); err != nil {
		return fmt.Errorf("--public-url: %w", err)
	}
	return nil
}

// parseRetention reads --retention (embed.ParseRetention), naming the
// flag in its error.
func parseRetention(s string) (time.Duration, error) {
	d, err := embed.ParseRetention(s)
	if err != nil {
		return 0, fmt.Errorf("--retention %q: %w", s, err)
	}
	return d, nil
}

// joinAddrs splits --join.
func (c serveConfig) joinAddrs() []string {
	var out []string
	for _, a := range strings.Split(c.Join, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: must be debug, info, warn or error", s)
	}
	return l, nil
}

// newLogger returns the process logger on w, buffered (package logbuf):
// the caller closes the returned Writer when the process is done logging.
func newLogger(cfg serveConfig, w io.Writer) (*slog.Logger, *logbuf.Writer) {
	level, _ := parseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	bw := logbuf.New(w)
	var h slog.Handler = slog.NewTextHandler(bw, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(bw, opts)
	}
	return slog.New(logbuf.Handler(h, bw)), bw
}

// parseGossipKeys reads --gossip-key: comma-separated base64 keys of 16, 24
// or 32 bytes, the first one primary. Empty means no encryption.
func parseGossipKeys(s string) ([][]byte, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var keys [][]byte
	for i, part := range strings.Split(s, ",") {
		k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("--gossip-key: key %d is not base64: %w", i+1, err)
		}
		if l := len(k); l != 16 && l != 24 && l != 32 {
			return nil, fmt.Errorf("--gossip-key: key %d is %d bytes, want 16, 24 or 32 (carmy keygen makes one)", i+1, l)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// countSet counts the non-empty strings.
func countSet(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}

// nodeTLS returns the node TLS files, nil when none is given, or an error
// when only some are.
func (c serveConfig) nodeTLS() (*cluster.NodeTLS, error) {
	switch countSet(c.NodeTLSCA, c.NodeTLSCert, c.NodeTLSKey) {
	case 0:
		return nil, nil
	case 3:
		return &cluster.NodeTLS{CAFile: c.NodeTLSCA, CertFile: c.NodeTLSCert, KeyFile: c.NodeTLSKey}, nil
	}
	return nil, fmt.Errorf("--node-tls-ca, --node-tls-cert and --node-tls-key go together: give all three or none")
}

// apiTLS loads --tls-cert and --tls-key (both or neither) as the API's
// reloading key pair; nil when neither is given.
func (c serveConfig) apiTLS(log *slog.Logger) (*tlsmux.KeyPair, error) {
	switch countSet(c.TLSCert, c.TLSKey) {
	case 0:
		return nil, nil
	case 2:
		kp, err := tlsmux.LoadKeyPair(c.TLSCert, c.TLSKey, log)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
		return kp, nil
	}
	return nil, fmt.Errorf("--tls-cert and --tls-key go together: give both or neither")
}
