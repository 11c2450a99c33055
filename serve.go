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
	"github.com/carmyhq/carmy/internal/netaddr"
	"github.com/carmyhq/carmy/internal/tlsmux"
	"github.com/carmyhq/carmy/store"
)

var _ api.Runtime = (*Runtime)(nil)

// DefaultAddr is where Run serves the HTTP API unless told otherwise.
const DefaultAddr = "127.0.0.1:8080"

// Readier is implemented by stores that can say whether they serve (a
// cluster member that knows a leader and has caught up).
type Readier interface {
	Ready(ctx context.Context) error
}

// Ready returns nil when the node can serve calls.
func (r *Runtime) Ready(ctx context.Context) error {
	if r.isClosing() {
		return ErrClosed
	}
	if r.phase.Load() == phaseStarting {
		return errStarting
	}
	if rd, ok := r.Store().(Readier); ok {
		return rd.Ready(ctx)
	}
	return nil
}

// CancelNotifier is implemented by stores that apply cancels on other
// nodes' behalf (a replicated store): the runtime is told when a cancel of
// one of its executions is applied, wherever it was asked.
type CancelNotifier interface {
	OnCancel(fn func(executionID string))
}

// Start prepares the runtime to take calls: it checks the setup, subscribes
// to the store's cancels, and marks this node's executions that a previous
// process left running as interrupted, so that they answer
// EXECUTION_UNCERTAIN rather than look alive. Serve calls it (retrying
// while the store is unavailable); a caller that serves the API itself
// calls it first.
func (r *Runtime) Start(ctx context.Context) error {
	if err := r.Err(); err != nil {
		return err
	}
	if cn, ok := r.Store().(CancelNotifier); ok {
		cn.OnCancel(func(id string) { r.runs.cancel(id, errCancelled) })
	}
	n, err := r.Store().MarkInterrupted(ctx, r.cfg.NodeID)
	if err != nil {
		return fmt.Errorf("marking this node's executions interrupted: %w", err)
	}
	if n > 0 {
		r.cfg.Logger.Warn("executions left running by a previous process are now interrupted",
			slog.Int("count", n), slog.String("node_id", r.cfg.NodeID))
	}
	if rd, ok := r.Store().(Readier); ok {
		if err := rd.Ready(ctx); err != nil {
			return fmt.Errorf("the store is not ready: %w", err)
		}
	}
	r.phase.Store(phaseStarted)
	return nil
}

// Phases of a runtime that Serve runs: until Start succeeds, calls answer
// UNAVAILABLE. A runtime used without Serve is never gated.
const (
	phaseUngated int32 = iota
	phaseStarting
	phaseStarted
)

// errStarting answers calls while the node starts.
var errStarting = store.NewError(store.CodeUnavailable, "the node is starting: it has not yet marked its previous executions interrupted")

// startLoop runs Start until it succeeds or ctx ends.
func (r *Runtime) startLoop(ctx context.Context) {
	for attempt := 0; ; attempt++ {
		err := r.Start(ctx)
		if err == nil {
			r.cfg.Logger.Info("started: taking calls", slog.String("node_id", r.cfg.NodeID))
			return
		}
		if attempt%5 == 0 {
			r.cfg.Logger.Warn("not started yet; retrying", slog.Any("err", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff(attempt)):
		}
	}
}

// Shutdown stops taking calls, waits up to DrainTimeout (or ctx) for
// running tools, then cancels those still running and waits for their
// outcomes to be recorded while ctx allows.
func (r *Runtime) Shutdown(ctx context.Context) error {
	r.closed.Do(func() { close(r.closing) })
	drain, cancel := context.WithTimeout(ctx, r.cfg.DrainTimeout)
	err := r.runs.wait(drain)
	cancel()
	if err != nil {
		r.cfg.Logger.Warn("cancelling tools still running at shutdown", slog.Int("count", r.runs.len()))
		r.runs.cancelAll(errShutdown)
		err = r.runs.wait(ctx)
	}
	if bgErr := r.bg.wait(ctx); bgErr != nil {
		err = errors.Join(err, bgErr)
	}
	return err
}

// Serve serves the HTTP API on ln until ctx is done, then shuts down
// gracefully: the listener closes, calls in flight finish (their tools
// drain as Shutdown describes), and Serve returns nil.
func (r *Runtime) Serve(ctx context.Context, ln net.Listener, cfg api.Config) error {
	if cfg.Logger == nil {
		cfg.Logger = r.cfg.Logger
	}
	if cfg.Metrics == nil {
		cfg.Metrics = r.reg
	}
	h, err := api.New(r, cfg)
	if err != nil {
		return err
	}
	if err := r.Err(); err != nil {
		return err
	}
	// Serve at once and start in the background: until the store is
	// ready (a cluster node may wait for a leader) calls answer
	// UNAVAILABLE, while /healthz, /readyz and the internal endpoints work.
	r.phase.CompareAndSwap(phaseUngated, phaseStarting)
	go r.startLoop(ctx)
	to := cfg.Timeouts.WithDefaults()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: to.ReadHeader,
		IdleTimeout:       to.Idle,
		MaxHeaderBytes:    to.HeaderBytes,
		ErrorLog:          slog.NewLogLogger(r.cfg.Logger.Handler(), slog.LevelWarn),
	}
	if cfg.TLS != nil || cfg.NodeTLS != nil {
		// One port serves HTTPS (or plain HTTP) to clients and mutual TLS
		// to other nodes; the first byte of a connection tells which.
		ln = tlsmux.New(ln, tlsmux.Config(cfg.TLS, cfg.NodeTLS), to.ReadHeader)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	r.cfg.Logger.Info("serving the API", slog.String("http_addr", ln.Addr().String()), slog.String("scheme", scheme),
		slog.Bool("node_tls", cfg.NodeTLS != nil), slog.String("node_id", r.cfg.NodeID))

	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), r.cfg.DrainTimeout+5*time.Second)
	defer cancel()
	// Close the listener and drain the tools at once: calls in flight wait
	// for their tools, which Shutdown bounds.
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Shutdown(stop) }()
	shutErr := r.Shutdown(stop)
	if err := <-httpDone; err != nil {
		shutErr = errors.Join(shutErr, fmt.Errorf("closing the API: %w", err))
	}
	if shutErr != nil {
		r.cfg.Logger.Warn("shutdown was not clean", slog.Any("err", shutErr))
	}
	return nil
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
