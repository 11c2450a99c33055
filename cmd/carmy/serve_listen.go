package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"syscall"

	"github.com/carmyhq/carmy/cluster"
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
		return nil, listenErr("http-addr", cfg.HTTPAddr, err)
	}
	return ln, nil
}

// listenErr words a failure to bind the address addr of the flag --name:
// it names the flag, and for an address in use says what to do.
func listenErr(name, addr string, err error) error {
	// memberlist words its cause with %v: the errno is only in the text.
	if errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), syscall.EADDRINUSE.Error()) {
		return fmt.Errorf("--%s %s: address already in use: another process (another node?) listens there; stop it, or give another port with --%s or $%s: %w",
			name, addr, name, envOf(name), err)
	}
	return fmt.Errorf("--%s %s: cannot listen: %w", name, addr, err)
}

// explainListen names the flag of a cluster listener that could not bind
// (cluster.ListenError); other errors are returned as they are.
func explainListen(err error) error {
	var le *cluster.ListenError
	if !errors.As(err, &le) {
		return err
	}
	name := "raft-addr"
	if le.Listener == cluster.ListenerGossip {
		name = "gossip-addr"
	}
	return listenErr(name, le.Addr, le.Err)
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
