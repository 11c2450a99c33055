package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
)

// listen binds the API's address, once the node's names resolve. The
// listener comes first: the node advertises the address actually bound.
func listen(ctx context.Context, cfg serveConfig, log *slog.Logger) (net.Listener, error) {
	// A name of this node's may appear in DNS only after it starts (a pod
	// under a headless Service): wait for it rather than fail to bind.
	if err := waitResolvable(ctx, log, net.DefaultResolver.LookupHost, resolveWait, cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.HTTPAddr, err)
	}
	return ln, nil
}

// advertised is the HTTP address other nodes reach this one at: the
// --http-addr as given, with the port actually bound when it was 0.
func advertised(flagAddr string, bound net.Addr) string {
	host, port, err := net.SplitHostPort(flagAddr)
	if err != nil || host == "" || port == "0" {
		_, bport, _ := net.SplitHostPort(bound.String())
		if host == "" {
			return bound.String()
		}
		return net.JoinHostPort(host, bport)
	}
	return flagAddr
}
