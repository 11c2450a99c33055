package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeEnv returns a getenv that reads m only, so tests never depend on the
// environment they run in.
func fakeEnv(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}

// clearCarmyEnv empties every CARMY_* variable for the test, for the code
// paths that read the real environment (serve, run).
func clearCarmyEnv(t *testing.T) {
	t.Helper()
	for _, fe := range flagEnv {
		t.Setenv(fe.env, "")
	}
}

// defaultServeConfig is the configuration of `carmy serve` without flags
// or environment (docs/cli.md#carmy-serve), in a directory without carmy-data/node1: no
// node id yet (serve takes the one kept in the data dir), and the data dir
// of a node without one.
var defaultServeConfig = serveConfig{
	DataDir:           filepath.Join("carmy-data", "default"),
	HTTPAddr:          "127.0.0.1:8080",
	RaftAddr:          "127.0.0.1:8300",
	GossipAddr:        "127.0.0.1:8301",
	MaxEntries:        100000,
	MaxBytes:          1 << 30,
	Retention:         "off",
	SnapshotThreshold: 8192,
	SnapshotInterval:  2 * time.Minute,
	RaftLog:           "wal",
	LogFormat:         "text",
	LogLevel:          "info",
	Store:             "raft",
	StoreLease:        10 * time.Second,
}

func TestParseServeDefaults(t *testing.T) {
	var out bytes.Buffer
	cfg, err := parseServe(nil, fakeEnv(nil), &out)
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	if cfg != defaultServeConfig {
		t.Errorf("defaults = %+v, want %+v", cfg, defaultServeConfig)
	}
	if cfg.Bootstrap || cfg.Join != "" || cfg.ClusterKey != "" || cfg.FastFailover || cfg.Dev || cfg.Pprof {
		t.Errorf("defaults = %+v: bootstrap, join, cluster key, fast failover, dev and pprof are off by default", cfg)
	}
	if got := cfg.joinAddrs(); got != nil {
		t.Errorf("joinAddrs() = %q, want none", got)
	}
	if out.Len() != 0 {
		t.Errorf("parseServe printed %q on success", out.String())
	}
}

func TestParseServeEnvironment(t *testing.T) {
	tests := []struct {
		env, value string
		check      func(serveConfig) bool
	}{
		{"CARMY_NODE_ID", "node7", func(c serveConfig) bool {
			// The default data dir follows the node id.
			return c.NodeID == "node7" && c.NodeIDSet && c.DataDir == filepath.Join("carmy-data", "node7")
		}},
		{"CARMY_DATA_DIR", "/var/lib/carmy", func(c serveConfig) bool { return c.DataDir == "/var/lib/carmy" }},
		{"CARMY_HTTP_ADDR", "127.0.0.1:9999", func(c serveConfig) bool { return c.HTTPAddr == "127.0.0.1:9999" }},
		{"CARMY_RAFT_ADDR", "127.0.0.1:9300", func(c serveConfig) bool { return c.RaftAddr == "127.0.0.1:9300" }},
		{"CARMY_GOSSIP_ADDR", "127.0.0.1:9301", func(c serveConfig) bool { return c.GossipAddr == "127.0.0.1:9301" }},
		{"CARMY_BOOTSTRAP", "true", func(c serveConfig) bool { return c.Bootstrap }},
		{"CARMY_PPROF", "true", func(c serveConfig) bool { return c.Pprof }},
		{"CARMY_MAX_INFLIGHT_BYTES", "1048576", func(c serveConfig) bool { return c.MaxInflightBytes == 1<<20 }},
		{"CARMY_BOOTSTRAP_NODE", "carmy-0", func(c serveConfig) bool { return c.BootstrapNode == "carmy-0" }},
		{"CARMY_JOIN", "127.0.0.1:8081,127.0.0.1:8082", func(c serveConfig) bool {
			return c.Join == "127.0.0.1:8081,127.0.0.1:8082" && slices.Equal(c.joinAddrs(), []string{"127.0.0.1:8081", "127.0.0.1:8082"})
		}},
		{"CARMY_CONFIG", "/etc/carmy/carmy.yaml", func(c serveConfig) bool { return c.ConfigPath == "/etc/carmy/carmy.yaml" }},
		{"CARMY_MAX_ENTRIES", "42", func(c serveConfig) bool { return c.MaxEntries == 42 }},
		{"CARMY_RAFT_LOG", "bolt", func(c serveConfig) bool { return c.RaftLog == "bolt" }},
		{"CARMY_MAX_BYTES", "2147483648", func(c serveConfig) bool { return c.MaxBytes == 2<<30 && c.MaxBytesSet }},
		{"CARMY_RETENTION", "30d", func(c serveConfig) bool { return c.Retention == "30d" }},
		{"CARMY_CLUSTER_KEY", "s3cret", func(c serveConfig) bool { return c.ClusterKey == "s3cret" }},
		{"CARMY_CLUSTER_KEY_FILE", "/etc/carmy/cluster-key", func(c serveConfig) bool { return c.ClusterKeyFile == "/etc/carmy/cluster-key" }},
		{"CARMY_GOSSIP_KEY_FILE", "/etc/carmy/gossip-key", func(c serveConfig) bool { return c.GossipKeyFile == "/etc/carmy/gossip-key" }},
		{"CARMY_NODE_TLS_CA", "/tls/ca.pem", func(c serveConfig) bool { return c.NodeTLSCA == "/tls/ca.pem" }},
		{"CARMY_NODE_TLS_CERT", "/tls/n1.pem", func(c serveConfig) bool { return c.NodeTLSCert == "/tls/n1.pem" }},
		{"CARMY_NODE_TLS_KEY", "/tls/n1-key.pem", func(c serveConfig) bool { return c.NodeTLSKey == "/tls/n1-key.pem" }},
		{"CARMY_TLS_CERT", "/tls/api.pem", func(c serveConfig) bool { return c.TLSCert == "/tls/api.pem" }},
		{"CARMY_TLS_KEY", "/tls/api-key.pem", func(c serveConfig) bool { return c.TLSKey == "/tls/api-key.pem" }},
		{"CARMY_INSECURE", "true", func(c serveConfig) bool { return c.Insecure }},
		{"CARMY_GOSSIP_KEY", "AQEBAQEBAQEBAQEBAQEBAQ==", func(c serveConfig) bool { return c.GossipKey == "AQEBAQEBAQEBAQEBAQEBAQ==" }},
		{"CARMY_FAST_FAILOVER", "1", func(c serveConfig) bool { return c.FastFailover }},
		{"CARMY_SNAPSHOT_THRESHOLD", "100", func(c serveConfig) bool { return c.SnapshotThreshold == 100 }},
		{"CARMY_SNAPSHOT_INTERVAL", "30s", func(c serveConfig) bool { return c.SnapshotInterval == 30*time.Second }},
		{"CARMY_LOG_FORMAT", "json", func(c serveConfig) bool { return c.LogFormat == "json" }},
		{"CARMY_LOG_LEVEL", "debug", func(c serveConfig) bool { return c.LogLevel == "debug" }},
		{"CARMY_ALLOWED_HOSTS", "carmy.lan,*.corp.example", func(c serveConfig) bool { return c.AllowedHosts == "carmy.lan,*.corp.example" }},
		{"CARMY_TRUSTED_PROXIES", "10.0.0.0/8,192.0.2.1", func(c serveConfig) bool { return c.TrustedProxies == "10.0.0.0/8,192.0.2.1" }},
		{"CARMY_PUBLIC_URL", "https://carmy.example.com", func(c serveConfig) bool { return c.PublicURL == "https://carmy.example.com" }},
		{"CARMY_STORE", "postgres://carmy@db:5432/carmy", func(c serveConfig) bool { return c.Store == "postgres://carmy@db:5432/carmy" }},
		{"CARMY_STORE_PASSWORD_FILE", "/run/secrets/pg", func(c serveConfig) bool { return c.StorePasswordFile == "/run/secrets/pg" }},
		{"CARMY_STORE_LEASE", "3s", func(c serveConfig) bool { return c.StoreLease == 3*time.Second }},
	}
	if len(tests) != len(flagEnv) {
		t.Fatalf("the table covers %d variables, flagEnv has %d: add the new ones", len(tests), len(flagEnv))
	}
	covered := make(map[string]bool)
	for _, tt := range tests {
		covered[tt.env] = true
		t.Run(tt.env, func(t *testing.T) {
			var out bytes.Buffer
			cfg, err := parseServe(nil, fakeEnv(map[string]string{tt.env: tt.value}), &out)
			if err != nil {
				t.Fatalf("parseServe with %s=%s: %v", tt.env, tt.value, err)
			}
			if !tt.check(cfg) {
				t.Errorf("%s=%s gave %+v", tt.env, tt.value, cfg)
			}
			// It sets its flag and nothing else.
			var fromFlag bytes.Buffer
			arg := "--" + flagOf(t, tt.env) + "=" + tt.value
			want, err := parseServe([]string{arg}, fakeEnv(nil), &fromFlag)
			if err != nil {
				t.Fatalf("parseServe(%s): %v", arg, err)
			}
			if cfg != want {
				t.Errorf("%s=%s gave\n%+v\nthe flag gives\n%+v", tt.env, tt.value, cfg, want)
			}
		})
	}
	for _, fe := range flagEnv {
		if !covered[fe.env] {
			t.Errorf("the table does not cover %s", fe.env)
		}
	}
}

// flagOf returns the flag that env sets.
func flagOf(t *testing.T, env string) string {
	t.Helper()
	for _, fe := range flagEnv {
		if fe.env == env {
			return fe.flag
		}
	}
	t.Fatalf("no flag for %s", env)
	return ""
}

func TestParseServeFlagBeatsEnvironment(t *testing.T) {
	env := fakeEnv(map[string]string{
		"CARMY_NODE_ID":            "from-env",
		"CARMY_DATA_DIR":           "/env/data",
		"CARMY_HTTP_ADDR":          "127.0.0.1:1111",
		"CARMY_RAFT_ADDR":          "127.0.0.1:1300",
		"CARMY_GOSSIP_ADDR":        "127.0.0.1:1301",
		"CARMY_BOOTSTRAP":          "true",
		"CARMY_JOIN":               "127.0.0.1:1",
		"CARMY_MAX_ENTRIES":        "5",
		"CARMY_RETENTION":          "72h",
		"CARMY_CLUSTER_KEY":        "env-key",
		"CARMY_FAST_FAILOVER":      "true",
		"CARMY_SNAPSHOT_THRESHOLD": "10",
		"CARMY_SNAPSHOT_INTERVAL":  "10s",
		"CARMY_LOG_FORMAT":         "json",
		"CARMY_LOG_LEVEL":          "debug",
	})
	args := []string{
		"--node-id", "from-flag", "--http-addr=127.0.0.1:2222", "--max-entries", "7", "--log-format", "text",
		"--raft-addr", "127.0.0.1:2300", "--bootstrap=false", "--join", "127.0.0.1:2,127.0.0.1:3",
		"--retention", "30d", "--cluster-key", "flag-key", "--fast-failover=false", "--snapshot-threshold", "20",
	}
	var out bytes.Buffer
	cfg, err := parseServe(args, env, &out)
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	want := serveConfig{
		NodeID: "from-flag", NodeIDSet: true, DataDir: "/env/data", HTTPAddr: "127.0.0.1:2222", RaftAddr: "127.0.0.1:2300",
		GossipAddr: "127.0.0.1:1301", Join: "127.0.0.1:2,127.0.0.1:3", MaxEntries: 7, MaxBytes: 1 << 30, Retention: "30d",
		ClusterKey: "flag-key", SnapshotThreshold: 20, SnapshotInterval: 10 * time.Second, RaftLog: "wal",
		LogFormat: "text", LogLevel: "debug", Store: "raft", StoreLease: 10 * time.Second,
	}
	if cfg != want {
		t.Errorf("parseServe =\n%+v\nwant\n%+v (flags win, the environment fills the rest)", cfg, want)
	}
}

func TestParseServeDevBootstraps(t *testing.T) {
	tests := []struct {
		name          string
		args          []string
		env           map[string]string
		bootstrap     bool
		join          []string
		wantDataDirOf string
	}{
		{name: "nothing", bootstrap: false},
		{name: "--bootstrap", args: []string{"--bootstrap"}, bootstrap: true},
		{name: "--dev", args: []string{"--dev"}, bootstrap: true},
		{name: "--dev --join", args: []string{"--dev", "--join", "127.0.0.1:8081"}, bootstrap: false, join: []string{"127.0.0.1:8081"}},
		{name: "--dev with CARMY_JOIN", args: []string{"--dev"}, env: map[string]string{"CARMY_JOIN": "127.0.0.1:8081"}, bootstrap: false, join: []string{"127.0.0.1:8081"}},
		{name: "--join", args: []string{"--join", "127.0.0.1:8081"}, bootstrap: false, join: []string{"127.0.0.1:8081"}},
		{name: "--dev --bootstrap=false", args: []string{"--dev", "--bootstrap=false"}, bootstrap: true}, // --dev is --bootstrap
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg, err := parseServe(tt.args, fakeEnv(tt.env), &out)
			if err != nil {
				t.Fatalf("parseServe(%q): %v", tt.args, err)
			}
			if cfg.Bootstrap != tt.bootstrap {
				t.Errorf("parseServe(%q): Bootstrap = %v, want %v", tt.args, cfg.Bootstrap, tt.bootstrap)
			}
			if got := cfg.joinAddrs(); !slices.Equal(got, tt.join) {
				t.Errorf("parseServe(%q): joinAddrs() = %q, want %q", tt.args, got, tt.join)
			}
		})
	}
}

func TestParseServeBootstrapAndJoinExclude(t *testing.T) {
	for _, args := range [][]string{
		{"--bootstrap", "--join", "127.0.0.1:8081"},
		{"--dev", "--bootstrap", "--join", "127.0.0.1:8081"},
	} {
		_, err := parseServe(args, fakeEnv(nil), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "exclude each other") {
			t.Errorf("parseServe(%q) = %v, want the exclusion refused", args, err)
		}
	}
}

func TestJoinAddrs(t *testing.T) {
	tests := []struct {
		join string
		want []string
	}{
		{"", nil},
		{"127.0.0.1:8081", []string{"127.0.0.1:8081"}},
		{"127.0.0.1:8081,127.0.0.1:8082,127.0.0.1:8083", []string{"127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"}},
		{" 10.0.0.1:8080 , 10.0.0.2:8080 ", []string{"10.0.0.1:8080", "10.0.0.2:8080"}},
		{"a:1,,b:2,", []string{"a:1", "b:2"}},
		{",", nil},
		{"[::1]:8080,localhost:8081", []string{"[::1]:8080", "localhost:8081"}},
	}
	for _, tt := range tests {
		cfg, err := parseServe([]string{"--join", tt.join}, fakeEnv(nil), &bytes.Buffer{})
		if err != nil {
			t.Fatalf("parseServe(--join %q): %v", tt.join, err)
		}
		if got := cfg.joinAddrs(); !slices.Equal(got, tt.want) {
			t.Errorf("--join %q: joinAddrs() = %q, want %q", tt.join, got, tt.want)
		}
	}
}

func TestParseRetention(t *testing.T) {
	day := 24 * time.Hour
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"off", 0},
		{"0", 0},
		{"72h", 72 * time.Hour},
		{"30d", 30 * day},
		{"1d", day},
		{"90m", 90 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"36500d", 36500 * day},
	} {
		got, err := parseRetention(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseRetention(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		// And through the flag.
		cfg, err := parseServe([]string{"--retention", tt.in}, fakeEnv(nil), &bytes.Buffer{})
		if err != nil || cfg.Retention != tt.in {
			t.Errorf("parseServe(--retention %q) = %q, %v", tt.in, cfg.Retention, err)
		}
	}
	for _, junk := range []string{
		"junk", "forever", "never", "OFF", "on", "-1h", "-3d", "0d", "1.5d", "d", "30 d", "30days",
		"3w", "72", "0s", "1e3h", "9999999999d", "200000d",
	} {
		if d, err := parseRetention(junk); err == nil {
			t.Errorf("parseRetention(%q) = %v, want an error", junk, d)
		}
		_, err := parseServe([]string{"--retention", junk}, fakeEnv(nil), &bytes.Buffer{})
		if err == nil {
			t.Errorf("parseServe(--retention %q) accepted it", junk)
			continue
		}
		if errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--retention") || !strings.Contains(err.Error(), junk) {
			t.Errorf("parseServe(--retention %q) = %v, want a validation error naming --retention and the value", junk, err)
		}
	}
	// From the environment too.
	if _, err := parseServe(nil, fakeEnv(map[string]string{"CARMY_RETENTION": "soon"}), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Errorf("CARMY_RETENTION=soon: err = %v, want a retention error", err)
	}
}

func TestParseServeFlagOverridesInvalidEnvironmentValue(t *testing.T) {
	// An invalid value in the environment is checked only after the command
	// line had its say: validation looks at the final configuration.
	env := fakeEnv(map[string]string{"CARMY_LOG_FORMAT": "xml"})
	var out bytes.Buffer
	cfg, err := parseServe([]string{"--log-format", "json"}, env, &out)
	if err != nil {
		t.Fatalf("parseServe: %v", err)
	}
	if cfg.LogFormat != "json" {
		t.Errorf("LogFormat = %q, want json", cfg.LogFormat)
	}
}

func TestParseServeInvalidEnvironment(t *testing.T) {
	for _, tt := range []struct{ env, value string }{
		{"CARMY_MAX_ENTRIES", "abc"},
		{"CARMY_MAX_ENTRIES", "1e3"},
	} {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			var out bytes.Buffer
			_, err := parseServe(nil, fakeEnv(map[string]string{tt.env: tt.value}), &out)
			if err == nil {
				t.Fatalf("parseServe with %s=%s: no error", tt.env, tt.value)
			}
			if errors.Is(err, errUsage) {
				t.Errorf("err = %v: a bad environment value is not a command-line usage error", err)
			}
			if !strings.Contains(err.Error(), tt.env) {
				t.Errorf("err = %q, want it to name %s", err, tt.env)
			}
		})
	}
}

func TestParseServeInvalidValues(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		mention string
	}{
		{"max-entries zero", []string{"--max-entries", "0"}, nil, "--max-entries"},
		{"max-entries negative", []string{"--max-entries=-3"}, nil, "--max-entries"},
		{"max-entries zero from env", nil, map[string]string{"CARMY_MAX_ENTRIES": "0"}, "max-entries"},
		{"log-format xml", []string{"--log-format", "xml"}, nil, "--log-format"},
		{"log-level loud", []string{"--log-level", "loud"}, nil, "--log-level"},
		{"node-id with a space", []string{"--node-id", "a b"}, nil, "--node-id"},
		{"node-id with a slash", []string{"--node-id", "a/b"}, nil, "--node-id"},
		{"node-id empty", []string{"--node-id", ""}, nil, "--node-id"},
		{"snapshot-threshold zero", []string{"--snapshot-threshold", "0"}, nil, "--snapshot-threshold"},
		{"raft-log sqlite", []string{"--raft-log", "sqlite"}, nil, "--raft-log"},
		{"snapshot-interval zero", []string{"--snapshot-interval", "0s"}, nil, "--snapshot-interval"},
		{"snapshot-interval negative", []string{"--snapshot-interval=-1m"}, nil, "--snapshot-interval"},
		{"retention junk", []string{"--retention", "soon"}, nil, "--retention"},
		{"retention junk from env", nil, map[string]string{"CARMY_RETENTION": "-2d"}, "--retention"},
		{"allowed-hosts with a scheme", []string{"--allowed-hosts", "https://carmy.lan"}, nil, "--allowed-hosts"},
		{"allowed-hosts with a port", []string{"--allowed-hosts", "carmy.lan:8080"}, nil, "--allowed-hosts"},
		{"trusted-proxies junk", []string{"--trusted-proxies", "10.0.0.0/8,proxy.lan"}, nil, "--trusted-proxies"},
		{"trusted-proxies junk from env", nil, map[string]string{"CARMY_TRUSTED_PROXIES": "10.0.0.0/33"}, "--trusted-proxies"},
		{"public-url without scheme", []string{"--public-url", "carmy.example.com"}, nil, "--public-url"},
		{"public-url with a path", []string{"--public-url", "https://carmy.example.com/carmy"}, nil, "--public-url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := parseServe(tt.args, fakeEnv(tt.env), &out)
			if err == nil {
				t.Fatalf("parseServe(%q): no error", tt.args)
			}
			if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
				t.Errorf("err = %v, want a validation error", err)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("err = %q, want it to mention %s", err, tt.mention)
			}
		})
	}
}

func TestParseServeUsageErrors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		mention string
	}{
		{"positional argument", []string{"extra"}, `"extra"`},
		{"positional argument after flags", []string{"--dev", "now"}, `"now"`},
		{"unknown flag", []string{"--no-such-flag"}, "no-such-flag"},
		{"flag without its value", []string{"--node-id"}, "node-id"},
		{"non-numeric max-entries", []string{"--max-entries", "many"}, "max-entries"},
		{"non-numeric snapshot-threshold", []string{"--snapshot-threshold", "-1"}, "snapshot-threshold"},
		{"bad snapshot-interval", []string{"--snapshot-interval", "often"}, "snapshot-interval"},
		{"bad bootstrap", []string{"--bootstrap=maybe"}, "bootstrap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := parseServe(tt.args, fakeEnv(nil), &out)
			if !errors.Is(err, errUsage) {
				t.Fatalf("parseServe(%q) = %v, want errUsage", tt.args, err)
			}
			if !strings.Contains(out.String(), tt.mention) {
				t.Errorf("output %q does not mention %s", out.String(), tt.mention)
			}
		})
	}
}

func TestParseServeHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		t.Run(arg, func(t *testing.T) {
			var out bytes.Buffer
			_, err := parseServe([]string{arg}, fakeEnv(nil), &out)
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("parseServe(%s) = %v, want flag.ErrHelp", arg, err)
			}
			checkServeUsage(t, out.String())
		})
	}
}

// checkServeUsage checks that text documents every flag of carmy serve and
// the environment variable of each.
func checkServeUsage(t *testing.T, text string) {
	t.Helper()
	var cfg serveConfig
	n := 0
	serveFlags(&cfg, &bytes.Buffer{}).VisitAll(func(f *flag.Flag) {
		n++
		if !strings.Contains(text, "--"+f.Name) {
			t.Errorf("usage does not mention --%s:\n%s", f.Name, text)
		}
	})
	if n < len(flagEnv)+1 { // every flag with a variable, and --dev
		t.Errorf("serve has %d flags, want at least %d", n, len(flagEnv)+1)
	}
	for _, fe := range flagEnv {
		if !strings.Contains(text, "$"+fe.env) {
			t.Errorf("usage does not mention $%s (of --%s):\n%s", fe.env, fe.flag, text)
		}
	}
	for _, s := range []string{
		"Usage: carmy serve", "--dev", "(default generated, kept in <data-dir>/node-id)", "(default 127.0.0.1:8080)", "(default 100000)",
		"(default 127.0.0.1:8300)", "(default 127.0.0.1:8301)", "(default off)", "(default 8192)", "(default 2m0s)",
		"./carmy-data/<node-id>",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("usage does not contain %q:\n%s", s, text)
		}
	}
}

func TestFlagEnvNamesExistingFlags(t *testing.T) {
	var cfg serveConfig
	fs := serveFlags(&cfg, &bytes.Buffer{})
	seen := make(map[string]bool)
	for _, fe := range flagEnv {
		if fs.Lookup(fe.flag) == nil {
			t.Errorf("flagEnv names --%s, which is not a flag", fe.flag)
		}
		if !strings.HasPrefix(fe.env, "CARMY_") {
			t.Errorf("--%s: variable %s does not start with CARMY_", fe.flag, fe.env)
		}
		if seen[fe.env] {
			t.Errorf("variable %s is used twice", fe.env)
		}
		seen[fe.env] = true
	}
	if fs.Lookup("dev") == nil {
		t.Error("no --dev flag")
	}
	if envOf("dev") != "" {
		t.Errorf("--dev has variable %s; docs/cli.md#carmy-serve gives it none", envOf("dev"))
	}
}

func TestNewLoggerFormats(t *testing.T) {
	t.Run("json", func(t *testing.T) {
		var buf bytes.Buffer
		log, out := newLogger(serveConfig{LogFormat: "json", LogLevel: "info"}, &buf)
		log.Info("hello", "k", "v")
		log.Debug("hidden")
		out.Close()
		var line map[string]any
		if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line); err != nil {
			t.Fatalf("not one JSON object per line: %q: %v", buf.String(), err)
		}
		if line["msg"] != "hello" || line["k"] != "v" {
			t.Errorf("line = %v", line)
		}
	})
	t.Run("text with debug", func(t *testing.T) {
		var buf bytes.Buffer
		log, out := newLogger(serveConfig{LogFormat: "text", LogLevel: "debug"}, &buf)
		log.Debug("shown", "k", "v")
		out.Close()
		if got := buf.String(); !strings.Contains(got, `msg=shown`) || !strings.Contains(got, "k=v") {
			t.Errorf("text log = %q", got)
		}
	})
	t.Run("warn hides info", func(t *testing.T) {
		var buf bytes.Buffer
		log, out := newLogger(serveConfig{LogFormat: "text", LogLevel: "warn"}, &buf)
		log.Info("hidden")
		out.Close()
		if buf.Len() != 0 {
			t.Errorf("info logged at level warn: %q", buf.String())
		}
	})
}

func TestRunVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		t.Run(arg, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := run(t.Context(), []string{arg}, &stdout, &stderr); err != nil {
				t.Fatalf("run(%s): %v", arg, err)
			}
			if got, want := stdout.String(), versionLine()+"\n"; got != want || !strings.HasPrefix(got, "carmy "+version+" (commit ") {
				t.Errorf("stdout = %q, want %q", got, want)
			}
			if stderr.Len() != 0 {
				t.Errorf("stderr = %q, want nothing", stderr.String())
			}
		})
	}
}

func TestRunNoArguments(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), nil, &stdout, &stderr)
	if !errors.Is(err, errUsage) {
		t.Fatalf("run() = %v, want errUsage", err)
	}
	if !strings.Contains(stderr.String(), "Usage:") || !strings.Contains(stderr.String(), "carmy serve") {
		t.Errorf("stderr = %q, want the usage", stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
}

func TestRunUnknownCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"frobnicate"}, &stdout, &stderr)
	if !errors.Is(err, errUsage) {
		t.Fatalf("run(frobnicate) = %v, want errUsage", err)
	}
	if got := stderr.String(); !strings.Contains(got, `unknown command "frobnicate"`) || !strings.Contains(got, "Usage:") {
		t.Errorf("stderr = %q, want the unknown command and the usage", got)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
}

func TestRunHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		t.Run(args[0], func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := run(t.Context(), args, &stdout, &stderr); err != nil {
				t.Fatalf("run(%q): %v", args, err)
			}
			if !strings.Contains(stdout.String(), "Usage:") || !strings.Contains(stdout.String(), "carmy help serve") {
				t.Errorf("stdout = %q, want the usage", stdout.String())
			}
		})
	}
}

func TestRunHelpServe(t *testing.T) {
	clearCarmyEnv(t)
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), []string{"help", "serve"}, &stdout, &stderr); err != nil {
		t.Fatalf("run(help serve): %v", err)
	}
	// Where the flags go (stdout or stderr) is not part of the contract;
	// that they are all there is.
	checkServeUsage(t, stdout.String()+stderr.String())
}

func TestRunServeBadFlagIsUsage(t *testing.T) {
	clearCarmyEnv(t)
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"serve", "--bogus"}, &stdout, &stderr)
	if !errors.Is(err, errUsage) {
		t.Fatalf("run(serve --bogus) = %v, want errUsage", err)
	}
	if !strings.Contains(stderr.String(), "bogus") {
		t.Errorf("stderr = %q, want it to name the flag", stderr.String())
	}
}

// TestTLSFlagsGoTogether checks that a node refuses half a TLS setup:
// --tls-cert without --tls-key (or the reverse), and fewer than all three
// --node-tls-* flags, and that unreadable API files are reported.
func TestTLSFlagsGoTogether(t *testing.T) {
	for _, c := range []serveConfig{{TLSCert: "a.pem"}, {TLSKey: "a-key.pem"}} {
		if _, err := c.apiTLS(nil); err == nil || !strings.Contains(err.Error(), "go together") {
			t.Errorf("apiTLS(%+v) = %v, want a 'go together' error", c, err)
		}
	}
	if _, err := (serveConfig{TLSCert: "/nonexistent.pem", TLSKey: "/nonexistent-key.pem"}).apiTLS(nil); err == nil {
		t.Error("apiTLS took files that do not exist")
	}
	if kp, err := (serveConfig{}).apiTLS(nil); kp != nil || err != nil {
		t.Errorf("apiTLS() without flags = %v, %v; want nil, nil", kp, err)
	}
	for _, c := range []serveConfig{{NodeTLSCA: "ca.pem"}, {NodeTLSCA: "ca.pem", NodeTLSCert: "n.pem"}, {NodeTLSKey: "k.pem"}} {
		if _, err := c.nodeTLS(); err == nil || !strings.Contains(err.Error(), "go together") {
			t.Errorf("nodeTLS(%+v) = %v, want a 'go together' error", c, err)
		}
	}
}
