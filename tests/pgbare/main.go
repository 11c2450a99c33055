package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, measures, and prints the result to stdout: 0 when it
// measured, 1 when it failed, 2 for a usage error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pgbare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.StringVar(&cfg.DSN, "dsn", os.Getenv("CARMY_STORE"), "the database (a postgres:// URL or key=value DSN) [$CARMY_STORE]")
	fs.StringVar(&cfg.Schema, "schema", "carmy_bare", "the schema of the tables it writes (made by store/postgres when missing)")
	fs.IntVar(&cfg.Pools, "pools", 3, "connection pools, each with its rounds, as that many nodes")
	fs.IntVar(&cfg.Clients, "clients", 64, "concurrent callers, spread over the pools, each one call at a time")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to measure")
	fs.DurationVar(&cfg.Warmup, "warmup", time.Second, "how long to call first without counting")
	jsonOut := fs.Bool("json", false, "print the result as one JSON object")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pgbare: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "pgbare: %v\n", err)
		return 2
	}
	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "pgbare: %v\n", err)
		return 1
	}
	if *jsonOut {
		b, _ := json.Marshal(res)
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	fmt.Fprintf(stdout, "pools %d   clients %d   duration %.1fs   calls %d   rounds %d (%.1f calls a round)\ncalls/s   %.1f\n",
		res.Pools, res.Clients, res.Seconds, res.Calls, res.Rounds, res.PerRound, res.CallsPerSec)
	return 0
}
