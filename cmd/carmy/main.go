package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "carmy:", err)
		os.Exit(1)
	}
}

// errUsage means the command line was wrong; the problem and the usage
// were already printed.
var errUsage = errors.New("usage")

const usage = `Carmy runs tools for AI agents and makes their retries safe.

Usage:
  carmy serve [flags]    run a node (carmy serve --dev to try it out)
  carmy version          print the version
  carmy help [command]   show help

Run 'carmy help serve' for the flags.
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
		return serve(ctx, rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "carmy", version)
		return nil
	case "help", "-h", "--help":
		if len(rest) > 0 && rest[0] == "serve" {
			return serve(ctx, []string{"--help"}, stdout, stdout)
		}
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprintf(stderr, "carmy: unknown command %q\n\n%s", cmd, usage)
		return errUsage
	}
}
