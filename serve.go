package carmy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/netaddr"
)

// approvalExpiryPeriod is how often the node that probes looks for gated
// calls whose approval has expired: an expired gate is recorded within
// about this long after its expires_at.
const approvalExpiryPeriod = time.Second

// The runtime is what the API serves.
var _ api.Runtime = (*engine.Runtime)(nil)

// DefaultAddr is where Run serves the HTTP API unless told otherwise.
const DefaultAddr = "127.0.0.1:8080"

// Serve serves the HTTP API on ln until ctx is done, then shuts down
// gracefully: the listener closes, calls in flight finish (their tools
// drain as engine.Runtime.Shutdown describes), and Serve returns nil.
//
// It serves at once and starts the runtime in the background
// (engine.Runtime.StartInBackground): until the store is ready (a cluster
// node may wait for a leader) calls answer UNAVAILABLE, while /healthz,
// /readyz and the peer (node-to-node) endpoints work. cfg.Logger defaults to the
// runtime's logger. Without cfg.Metrics nothing is counted and /metrics
// is not served (package metrics/prom gives them).
//
// Every error answer is the envelope of docs/errors.md, those net/http makes
// itself included where it can be told: headers over
// cfg.Timeouts.HeaderBytes are 431 with code INVALID_REQUEST, whether the
// API refuses them or net/http does, past api.Timeouts.ServerMaxHeaderBytes
// (envelopeListener).
func (r *Runtime) Serve(ctx context.Context, ln net.Listener, cfg api.Config) error {
	rc := r.Config()
	if cfg.Logger == nil {
		cfg.Logger = rc.Logger
	}
	h, err := api.New(r.rt, cfg)
	if err != nil {
		return err
	}
	defer h.Close()
	// A probe's resolutions are audited as the server's callers' are.
	r.rt.SetAuditor(h.Audit)
	if err := r.Err(); err != nil {
		return err
	}
	r.rt.StartInBackground(ctx)
	// Reconcile probes run while the node serves (docs/config.md#reconcile-probes).
	probeCtx, stopProbes := context.WithCancel(ctx)
	probing := make(chan struct{})
	go func() {
		defer close(probing)
		r.rt.RunProbes(probeCtx, r.rt.ProbeOwner())
	}()
	// Gated calls no one decided on expire (docs/policy.md#approval-gates),
	// proposed by the node that probes (a cluster's leader).
	expiring := make(chan struct{})
	go func() {
		defer close(expiring)
		r.rt.RunApprovalExpiry(probeCtx, approvalExpiryPeriod, r.rt.ProbeOwner())
	}()
	defer func() { stopProbes(); <-probing; <-expiring }()
	to := cfg.Timeouts.WithDefaults()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: to.ReadHeader,
		IdleTimeout:       to.Idle,
		MaxHeaderBytes:    to.ServerMaxHeaderBytes(),
		ErrorLog:          slog.NewLogLogger(rc.Logger.Handler(), slog.LevelWarn),
	}
	// Streams that last until their client leaves end as shutdown begins.
	srv.RegisterOnShutdown(h.CloseStreams)
	ln, scheme := withTLS(ln, cfg, to.ReadHeader)
	ln = envelopeListener(ln, api.OversizedHeadersAnswer(to.HeaderBytes), to.ReadHeader, rc.Logger)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	rc.Logger.Info("serving the API", slog.String("http_addr", ln.Addr().String()), slog.String("scheme", scheme),
		slog.Bool("node_tls", cfg.NodeTLS != nil), slog.String("node_id", rc.NodeID))

	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	r.shutdown(srv)
	return nil
}

// shutdown closes the listener and drains the tools at once: calls in
// flight wait for their tools, which the runtime's Shutdown bounds. A
// shutdown that is not clean is logged.
func (r *Runtime) shutdown(srv *http.Server) {
	rc := r.Config()
	stop, cancel := context.WithTimeout(context.Background(), rc.DrainTimeout+5*time.Second)
	defer cancel()
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Shutdown(stop) }()
	err := r.Shutdown(stop)
	if httpErr := <-httpDone; httpErr != nil {
		err = errors.Join(err, fmt.Errorf("closing the API: %w", httpErr))
	}
	if err != nil {
		rc.Logger.Warn("shutdown was not clean", slog.Any("err", err))
	}
}

// Run serves the HTTP API on DefaultAddr, without authentication, until
// ctx is done. Like the binary without tokens, it refuses a non-loopback
// address.
func (r *Runtime) Run(ctx context.Context) error {
	return r.ListenAndServe(ctx, DefaultAddr, api.Config{})
}

// ListenAndServe serves the HTTP API on addr until ctx is done. Without
// tokens in cfg.Auth it refuses an address that is not loopback.
func (r *Runtime) ListenAndServe(ctx context.Context, addr string, cfg api.Config) error {
	if err := r.Err(); err != nil {
		return err
	}
	if !cfg.Auth.Enabled() && !IsLoopback(addr) {
		return fmt.Errorf("refusing to serve %s without authentication: configure tokens or bind to a loopback address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	return r.Serve(ctx, ln, cfg)
}

// IsLoopback reports whether addr (host:port) names a loopback host:
// localhost, 127.0.0.0/8 or ::1. An empty host (all interfaces) is not.
func IsLoopback(addr string) bool { return netaddr.IsLoopback(addr) }
