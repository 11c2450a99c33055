package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/carmyhq/carmy/internal/bench"
	"github.com/carmyhq/carmy/internal/buildinfo"
	"github.com/carmyhq/carmy/internal/didyoumean"
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
  carmy keygen                            print a new random key (for --gossip-key, --cluster-key or a token)
  carmy tls ca|cert [...]                 make the cluster CA and node certificates (for --node-tls-*)
  carmy traces [--jaeger FILE]            receive a node's spans (OTLP/HTTP) and print each trace as a tree
  carmy version                           print the version
  carmy help [command]                    show help

Run 'carmy help serve' for the flags, 'carmy help cluster' for the cluster commands,
'carmy help bench' for the benchmark, 'carmy help traces' to see traced calls.
`

// versionUsage is what `carmy help version` prints.
const versionUsage = `Usage: carmy version

Prints the version of this build of Carmy, the commit it was built from and
the Go version that built it: carmy <version> (commit <sha>, <go version>).
The version is the module's (go install …@v1.2.3), or a pseudo-version of
the checkout it was built in; "dev" when the build recorded none.
`

// helpUsage is what `carmy help help` prints.
const helpUsage = `Usage: carmy help [command]

Prints the help of a command (serve, cluster, audit, bench, health, keygen,
tls, traces, version), or the list of commands.
`

// version is this build's version (internal/buildinfo).
var version = buildinfo.Version()

// versionLine is what `carmy version` prints.
func versionLine() string {
	bi := buildinfo.Get()
	commit := bi.Commit
	if commit == "" {
		commit = "unknown"
	}
	return fmt.Sprintf("carmy %s (commit %s, %s)", bi.Version, commit, bi.GoVersion)
}

// commandHelp returns the help of each command, for `carmy help <command>`
// and `carmy <command> --help`; serve's is printed by its flag set.
var commandHelp = map[string]string{
	"cluster": clusterUsage, "audit": auditUsage, "bench": bench.Usage, "health": healthUsage, "keygen": keygenUsage,
	"tls": tlsUsage, "traces": tracesUsage, "version": versionUsage, "help": helpUsage,
}

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
	case "traces":
		return tracesCmd(ctx, rest, stdout, stderr)
	case "keygen":
		return keygen(rest, rand.Reader, stdout, stderr)
	case "version", "--version":
		if wantsHelp(rest) {
			fmt.Fprint(stdout, versionUsage)
			return nil
		}
		if len(rest) > 0 {
			fmt.Fprintf(stderr, "carmy version: unexpected argument %q\n\n%s", rest[0], versionUsage)
			return errUsage
		}
		fmt.Fprintln(stdout, versionLine())
		return nil
	case "help", "-h", "--help":
		return help(ctx, rest, stdout, stderr)
	default:
		fmt.Fprintf(stderr, "carmy: unknown command %q%s\n\n%s", cmd, didYouMeanCommand(cmd), usage)
		return errUsage
	}
}

// help runs `carmy help [command]`: the command's help on stdout (exit
// 0), the list of commands without one, and a usage error (exit 2) for a
// command that does not exist.
func help(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return nil
	}
	if args[0] == "serve" {
		return serve(ctx, []string{"--help"}, stdout, stdout)
	}
	if text, ok := commandHelp[args[0]]; ok {
		fmt.Fprint(stdout, text)
		return nil
	}
	fmt.Fprintf(stderr, "carmy help: unknown command %q%s\n\n%s", args[0], didYouMeanCommand(args[0]), usage)
	return errUsage
}

// didYouMeanCommand returns " (did you mean \"x\"?)" for the command
// nearest to cmd, or "".
func didYouMeanCommand(cmd string) string {
	names := []string{"serve"}
	for name := range commandHelp {
		names = append(names, name)
	}
	slices.Sort(names)
	if near := didyoumean.Nearest(cmd, names, 2); near != "" {
		return fmt.Sprintf(" (did you mean %q?)", near)
	}
	return ""
}
