package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/carmyhq/carmy/internal/didyoumean"
	"github.com/carmyhq/carmy/internal/netaddr"
	"github.com/carmyhq/carmy/internal/tracing/tracerecv"
)

// `carmy traces` is a trace receiver for a terminal (docs/tracing.md):
// the OTLP/HTTP endpoint a node exports its spans to, printing each trace
// as a tree, without a Jaeger or a Collector to install.

const tracesUsage = `Usage: carmy traces [--listen host:port] [--jaeger FILE] [flags]

Receives the spans a node exports over OTLP/HTTP (POST /v1/traces, protobuf
or JSON) and prints each trace as an indented tree once no span of it
arrived for a second: each span's name, duration, kind, carmy.* attributes
and status.
Point a node at it with OTEL_EXPORTER_OTLP_ENDPOINT, in another terminal:
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 carmy serve --dev
With --jaeger it also keeps FILE rewritten with every trace received, as
the JSON that Jaeger's UI opens ("JSON File" on its search page). It keeps
the latest --max-traces traces; it stops on Ctrl-C (SIGINT) or SIGTERM,
printing what was still pending.

Flags:
  --listen host:port   where to receive spans (default 127.0.0.1:4318, OTLP/HTTP's port)
  --jaeger FILE        keep FILE rewritten with every trace kept, as Jaeger UI JSON
  --settle d           print a trace when no span of it arrived for d (default 1s)
  --all-attributes     print every attribute of a span, not only the carmy.* ones
  --max-traces N       traces kept, the oldest forgotten beyond (default 1000)
  --insecure           let --listen be off loopback: anyone who reaches it can send spans
`

// tracesConfig is what `carmy traces` was asked to do.
type tracesConfig struct {
	listen, jaeger string
	settle         time.Duration
	allAttributes  bool
	maxTraces      int
	insecure       bool
}

// tracesFlags returns the flag set of `carmy traces`, writing to cfg,
// which it sets to the defaults.
func tracesFlags(cfg *tracesConfig) *flag.FlagSet {
	*cfg = tracesConfig{listen: "127.0.0.1:4318", settle: time.Second, maxTraces: tracerecv.DefaultLimits.Traces}
	fs := flag.NewFlagSet("carmy traces", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.listen, "listen", cfg.listen, "")
	fs.StringVar(&cfg.jaeger, "jaeger", "", "")
	fs.DurationVar(&cfg.settle, "settle", cfg.settle, "")
	fs.BoolVar(&cfg.allAttributes, "all-attributes", false, "")
	fs.IntVar(&cfg.maxTraces, "max-traces", cfg.maxTraces, "")
	fs.BoolVar(&cfg.insecure, "insecure", false, "")
	return fs
}

// tracesCmd runs `carmy traces`.
func tracesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg tracesConfig
	fs := tracesFlags(&cfg)
	usageErr := func(format string, a ...any) error {
		fmt.Fprintf(stderr, "carmy traces: %s\n\n%s", fmt.Sprintf(format, a...), tracesUsage)
		return errUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, tracesUsage)
			return nil
		}
		return usageErr("%s", didyoumean.FlagError(err, fs))
	}
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
	case cfg.settle <= 0:
		return usageErr("--settle %s: want a positive duration", cfg.settle)
	case cfg.maxTraces <= 0:
		return usageErr("--max-traces %d: want at least 1", cfg.maxTraces)
	}
	if _, _, err := net.SplitHostPort(cfg.listen); err != nil {
		return usageErr("--listen %q: want host:port, e.g. 127.0.0.1:4318", cfg.listen)
	}
	if !netaddr.IsLoopback(cfg.listen) && !cfg.insecure {
		return usageErr("--listen %s is not a loopback address: anyone who reaches it could send spans; "+
			"bind to 127.0.0.1, or add --insecure", cfg.listen)
	}
	return runTraces(ctx, cfg, stdout, stderr)
}

// runTraces receives spans until ctx ends, printing each settled trace
// and keeping the Jaeger file written.
func runTraces(ctx context.Context, cfg tracesConfig, stdout, stderr io.Writer) error {
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("traces: %w (another receiver, a Jaeger or a Collector, may hold it: "+
				"give --listen another port, and the node the same in OTEL_EXPORTER_OTLP_ENDPOINT)", err)
		}
		return fmt.Errorf("traces: %w", err)
	}
	if cfg.jaeger != "" { // an empty document now: a path that cannot be written fails at once
		if err := writeJaegerFile(cfg.jaeger, nil); err != nil {
			ln.Close()
			return err
		}
	}
	received := tracerecv.NewBuffer(tracerecv.Limits{Traces: cfg.maxTraces}, nil)
	mux := http.NewServeMux()
	mux.Handle("/v1/traces", &tracerecv.Handler{Buffer: received})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	endpoint := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "carmy traces: receiving OTLP/HTTP spans at %s/v1/traces\n", endpoint)
	fmt.Fprintf(stdout, "Start a node that exports to it, in another terminal:\n  OTEL_EXPORTER_OTLP_ENDPOINT=%s carmy serve --dev\n", endpoint)
	fmt.Fprintf(stdout, "or, in a clone of the repository without carmy installed:\n  OTEL_EXPORTER_OTLP_ENDPOINT=%s go run ./cmd/carmy serve --dev\n", endpoint)
	if cfg.jaeger != "" {
		fmt.Fprintf(stdout, "Every trace is also written to %s (Jaeger UI JSON).\n", cfg.jaeger)
	}
	fmt.Fprintf(stdout, "A trace is printed once no span of it arrived for %s. Ctrl-C stops.\n\n", cfg.settle)

	var prefixes []string
	if !cfg.allAttributes {
		prefixes = []string{"carmy."}
	}
	// flush prints the traces that settled (all pending ones at the end)
	// and rewrites the Jaeger file when one did.
	flush := func(settle time.Duration) error {
		ready := received.Quiet(settle)
		for _, t := range ready {
			if err := tracerecv.WriteTree(stdout, t, prefixes...); err != nil {
				return fmt.Errorf("traces: %w", err)
			}
			fmt.Fprintln(stdout)
		}
		if len(ready) > 0 && cfg.jaeger != "" {
			return writeJaegerFile(cfg.jaeger, received.Traces())
		}
		return nil
	}
	tick := time.NewTicker(max(cfg.settle/4, 10*time.Millisecond))
	defer tick.Stop()
receive:
	for {
		select {
		case <-tick.C:
			if err := flush(cfg.settle); err != nil {
				srv.Close()
				return err
			}
		case err := <-served:
			return fmt.Errorf("traces: %w", err)
		case <-ctx.Done():
			break receive
		}
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close()
	}
	err = flush(0)
	st := received.Stats()
	fmt.Fprintf(stderr, "carmy traces: stopped; %d traces (%d spans) kept, %d evicted, %d spans dropped\n", st.Traces, st.Spans, st.Evicted, st.Dropped)
	return err
}

// writeJaegerFile replaces path with traces as Jaeger UI JSON, atomically
// (a reader never sees half a file), mode 0600: spans name principals.
func writeJaegerFile(path string, traces []tracerecv.Trace) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("traces: --jaeger: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tracerecv.WriteJaeger(tmp, traces); err != nil {
		tmp.Close()
		return fmt.Errorf("traces: --jaeger %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("traces: --jaeger %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("traces: --jaeger: %w", err)
	}
	return nil
}
