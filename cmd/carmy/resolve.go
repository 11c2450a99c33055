package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// resolveWait bounds how long a node waits for the host names of its own
// addresses to resolve before it gives up.
const resolveWait = 2 * time.Minute

// waitResolvable waits until every host name among addrs (host:port)
// resolves, so that a node whose name appears in DNS a little after it
// starts (a pod under a headless Service, a container on a new network)
// binds instead of failing at once. IPs and empty hosts need no wait. It
// gives up after within and returns the last lookup error; ctx ends it
// early.
func waitResolvable(ctx context.Context, log *slog.Logger, lookup func(context.Context, string) ([]string, error), within time.Duration, addrs ...string) error {
	deadline := time.Now().Add(within)
	for _, addr := range addrs {
		host, _, err := net.SplitHostPort(addr)
		if err != nil || host == "" || net.ParseIP(host) != nil {
			continue // a bad address is reported where it is used
		}
		for attempt := 0; ; attempt++ {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := lookup(lctx, host)
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s does not resolve after %s: %w", host, within, err)
			}
			if attempt == 0 {
				log.Warn("waiting for this node's host name to resolve", slog.String("host", host), slog.Any("err", err))
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s to resolve: %w", host, ctx.Err())
			case <-time.After(min(100*time.Millisecond<<min(attempt, 5), 2*time.Second)):
			}
		}
	}
	return nil
}
