package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/carmyhq/carmy/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := exitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// exitCode reports what run returned as the binary does and returns its
// exit status: 0 on success; 2 for a usage error (the problem and the
// usage were already printed); else 1, with "carmy: <err>" on stderr.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintln(stderr, "carmy:", err)
		return 1
	}
}

// errUsage means the command line was wrong; the problem and the usage
// were already printed.
var errUsage = errors.New("usage")

const usage = `Carmy runs tools for AI agents and makes their retries safe.

Usage:
  carmy serve [flags]                     run a node (carmy serve --dev to try it out)
  carmy cluster status|join|remove [...]  administer a cluster through a node's admin API
  carmy audit export|verify [...]         export the audit ledger; verify an export offline
  carmy bench [flags]                     drive running nodes with calls; report throughput and latency
  carmy health [--addr H:P] [--live]      exit 0 iff a node is ready (or alive): a health check for images
  carmy keygen                            print a new random gossip key (for --gossip-key)
  carmy tls ca|cert [...]                 make the cluster CA and node certificates (for --node-tls-*)
  carmy version                           print the version
  carmy help [command]                    show help

Run 'carmy help serve' for the flags, 'carmy help cluster' for the cluster commands,
'carmy help bench' for the benchmark.
`

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// run dispatches a command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		privateUmask()
		return serve(ctx, rest, stdout, stderr)
	case "cluster":
		return clusterCmd(ctx, rest, os.Getenv, stdout, stderr)
	case "audit":
		return auditCmd(ctx, rest, os.Getenv, stdout, stderr)
	case "bench":
		return benchCmd(ctx, rest, os.Getenv, stdout, stderr)
	case "health":
		return healthCmd(ctx, rest, os.Getenv, stdout, stderr)
	case "tls":
		return tlsCmd(rest, time.Now(), stdout, stderr)
	case "keygen":
		return keygen(rest, rand.Reader, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "carmy", version)
		return nil
	case "help", "-h", "--help":
		if len(rest) > 0 && rest[0] == "serve" {
			return serve(ctx, []string{"--help"}, stdout, stdout)
		}
		if len(rest) > 0 && rest[0] == "cluster" {
			fmt.Fprint(stdout, clusterUsage)
			return nil
		}
		if len(rest) > 0 && rest[0] == "audit" {
			fmt.Fprint(stdout, auditUsage)
			return nil
		}
		if len(rest) > 0 && rest[0] == "bench" {
			fmt.Fprint(stdout, bench.Usage)
			return nil
		}
		if len(rest) > 0 && rest[0] == "health" {
			fmt.Fprint(stdout, healthUsage)
			return nil
		}
		if len(rest) > 0 && rest[0] == "tls" {
			fmt.Fprint(stdout, tlsUsage)
			return nil
		}
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "carmy: unknown command %q\n\n%s", cmd, usage)
		return errUsage
	}
}
