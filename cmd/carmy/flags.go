package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// serveConfig is everything `carmy serve` is told by flags and the
// environment.
type serveConfig struct {
	NodeID     string
	HTTPAddr   string
	ConfigPath string
	Dev        bool
	MaxEntries int
	LogFormat  string
	LogLevel   string
}

// Defaults of SPEC §3.
const (
	defaultNodeID     = "node1"
	defaultHTTPAddr   = "127.0.0.1:8080"
	defaultMaxEntries = 100000
)

// flagEnv pairs each flag with its environment variable.
var flagEnv = []struct{ flag, env string }{
	{"node-id", "CARMY_NODE_ID"},
	{"http-addr", "CARMY_HTTP_ADDR"},
	{"config", "CARMY_CONFIG"},
	{"max-entries", "CARMY_MAX_ENTRIES"},
	{"log-format", "CARMY_LOG_FORMAT"},
	{"log-level", "CARMY_LOG_LEVEL"},
}

func serveFlags(cfg *serveConfig, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("carmy serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.NodeID, "node-id", defaultNodeID, "unique, stable name of this node")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", defaultHTTPAddr, "`host:port` of the HTTP API")
	fs.StringVar(&cfg.ConfigPath, "config", "", "YAML `file` declaring tools, auth tokens and limits")
	fs.BoolVar(&cfg.Dev, "dev", false, "try-it-out mode: demo tools on, auth off")
	fs.IntVar(&cfg.MaxEntries, "max-entries", defaultMaxEntries, "capacity of the idempotency store, in records")
	fs.StringVar(&cfg.LogFormat, "log-format", "text", "log format: text or json (one object per line)")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
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
			if f.DefValue != "" && f.DefValue != "false" {
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

Examples:
  carmy serve --dev
  CARMY_CONFIG=/etc/carmy/carmy.yaml carmy serve --http-addr 0.0.0.0:8080
`)
	}
	return fs
}

func envOf(flagName string) string {
	for _, fe := range flagEnv {
		if fe.flag == flagName {
			return fe.env
		}
	}
	return ""
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, flag.ErrHelp
		}
		return cfg, errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(out, "carmy serve: unexpected argument %q\n", fs.Arg(0))
		return cfg, errUsage
	}
	return cfg, cfg.validate()
}

func (c serveConfig) validate() error {
	switch {
	case c.NodeID == "" || strings.ContainsAny(c.NodeID, " \t\r\n/"):
		return fmt.Errorf("--node-id %q: must be non-empty, without spaces or slashes", c.NodeID)
	case c.MaxEntries <= 0:
		return fmt.Errorf("--max-entries %d: must be positive", c.MaxEntries)
	case c.LogFormat != "text" && c.LogFormat != "json":
		return fmt.Errorf("--log-format %q: must be text or json", c.LogFormat)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	return nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: must be debug, info, warn or error", s)
	}
	return l, nil
}

// newLogger returns the process logger on w.
func newLogger(cfg serveConfig, w io.Writer) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
