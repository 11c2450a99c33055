package testutil

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/mcp"
	"github.com/carmyhq/carmy/metrics/prom"
)

// Serve serves app's API with cfg on a fresh loopback port until the test
// ends, and returns the port's address (host:port, plain HTTP) once
// /readyz answers 200. Like a node (package embed), it serves the
// Prometheus metrics of app (prom.New) at /metrics and the MCP endpoint
// (mcp.Endpoint) at /mcp unless cfg says otherwise. At the end of the test the server is stopped and
// its Serve error, if any, fails the test.
func Serve(tb testing.TB, app *carmy.Runtime, cfg api.Config) string {
	tb.Helper()
	if cfg.Metrics == nil {
		cfg.Metrics = prom.New(app.Engine())
	}
	if cfg.MCP == nil {
		cfg.MCP = mcp.Endpoint
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, ln, cfg) }()
	tb.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	addr := ln.Addr().String()
	WaitFor(tb, 10*time.Second, "the node to be ready", func() error {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz answered %d", resp.StatusCode)
		}
		return nil
	})
	return addr
}

// Until polls cond every 20 ms until it holds, and fails the test when
// timeout passes first.
func Until(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	WaitFor(tb, timeout, what, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("not yet")
	})
}
