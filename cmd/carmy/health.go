package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/internal/certs"
	"github.com/carmyhq/carmy/internal/didyoumean"
)

const healthUsage = `Usage: carmy health [--addr host:port] [--live] [--ca-file PEM] [--timeout d]

Asks a node whether it is ready (GET /readyz) or, with --live, alive
(GET /healthz), and exits 0 when it answers 200, 1 otherwise. It is the
health check of images without a shell (FROM scratch): in Docker Compose,
  healthcheck: {test: ["CMD", "/carmy", "health", "--addr", "n1:8080"]}

Flags:
  --addr host:port   the node (an http:// or https:// URL too; default 127.0.0.1:8080) [$CARMY_ADDR]
  --live             ask /healthz (the process serves) instead of /readyz (it takes calls)
  --ca-file PEM      CA certificates to trust for https:// besides the system's [$CARMY_CA_FILE]
  --timeout d        bound on the request (default 3s)
`

// healthCmd runs `carmy health`.
func healthCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	addr, caFile, live, timeout := "127.0.0.1:8080", getenv(certs.EnvCAFile), false, 3*time.Second
	if a := getenv(envClusterAddr); a != "" {
		addr = a
	}
	fs := flag.NewFlagSet("carmy health", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&addr, "addr", addr, "")
	fs.StringVar(&caFile, "ca-file", caFile, "")
	fs.BoolVar(&live, "live", false, "")
	fs.DurationVar(&timeout, "timeout", timeout, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, healthUsage)
			return nil
		}
		fmt.Fprintf(stderr, "carmy health: %s\n\n%s", didyoumean.FlagError(err, fs), healthUsage)
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "carmy health: unexpected argument %q\n\n%s", fs.Arg(0), healthUsage)
		return errUsage
	}
	base, err := baseURL(addr)
	if err != nil {
		fmt.Fprintf(stderr, "carmy health: %v\n", err)
		return errUsage
	}
	tc, err := certs.ClientConfig(caFile)
	if err != nil {
		fmt.Fprintf(stderr, "carmy health: %v\n", err)
		return errUsage
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
	defer hc.CloseIdleConnections()
	c, err := client.New(base, client.WithHTTPClient(hc), client.WithUserAgent("carmy/"+version))
	if err != nil {
		fmt.Fprintf(stderr, "carmy health: %v\n", err)
		return errUsage
	}
	path, check, state := "/readyz", c.Ready, "ready"
	if live {
		path, check, state = "/healthz", c.Live, "alive"
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := check(ctx); err != nil {
		return fmt.Errorf("health: %s%s: %w", base, path, err)
	}
	fmt.Fprintf(stdout, "%s%s: %s\n", base, path, state)
	return nil
}
