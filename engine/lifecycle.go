package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/carmyhq/carmy/store"
)

// Ready returns nil when the node can serve calls: its gate is open (it is
// neither shutting down nor starting), and its backend is ready.
func (r *Runtime) Ready(ctx context.Context) error {
	if err := r.gate(); err != nil {
		return err
	}
	return r.Store().Ready(ctx)
}

// Start prepares the runtime to take calls: it checks the setup, subscribes
// to the backend's cancels, and marks this node's executions that a previous
// process left running as interrupted, so that they answer
// EXECUTION_UNCERTAIN rather than look alive. StartInBackground calls it
// (retrying while the store is unavailable); a caller that serves the API
// itself may call it first instead.
func (r *Runtime) Start(ctx context.Context) error {
	if err := r.Err(); err != nil {
		return err
	}
	b := r.Store()
	r.subscribe.Do(func() { b.OnCancel(func(id string) { r.runs.cancel(id, errCancelled) }) })
	if !r.cfg.NoPreviousExecutions {
		n, err := b.MarkInterrupted(ctx, r.cfg.NodeID)
		if err != nil {
			return fmt.Errorf("marking this node's executions interrupted: %w", err)
		}
		if n > 0 {
			r.cfg.Logger.Warn("executions left running by a previous process are now interrupted",
				slog.Int("count", n), slog.String("node_id", r.cfg.NodeID))
		}
	}
	if err := b.Ready(ctx); err != nil {
		return fmt.Errorf("the store is not ready: %w", err)
	}
	r.phase.Store(phaseStarted)
	return nil
}

// Phases of a runtime started with StartInBackground: until Start
// succeeds, calls answer UNAVAILABLE. A runtime never started that way is
// never gated.
const (
	phaseUngated int32 = iota
	phaseStarting
	phaseStarted
)

// gate is the runtime's gate, which Call and Ready both go through: it
// returns ErrClosed once Shutdown has begun, errStarting while a runtime
// started with StartInBackground has not yet started, and nil otherwise.
func (r *Runtime) gate() error {
	if r.isClosing() {
		return ErrClosed
	}
	if r.phase.Load() == phaseStarting {
		return errStarting
	}
	return nil
}

// errStarting answers calls while the node starts. Nothing was reserved,
// so the tool did not run ("tool_ran": false) and a retry with the same
// request_id is safe.
var errStarting error = &notReservedError{err: store.NewError(store.CodeUnavailable,
	"the node is starting: it has not yet marked interrupted the executions a previous process left running; nothing ran, retry with the same request_id")}

// StartInBackground gates the runtime, so that calls answer UNAVAILABLE
// while it starts, and runs Start in a goroutine of its own, again and
// again with a growing pause, until it succeeds (the gate opens) or ctx
// ends. It returns at once. A server calls it when it starts serving, so
// that /readyz and the node-to-node endpoints answer while the store gets
// ready (a cluster node may wait for a leader). A runtime with
// NoPreviousExecutions has nothing to mark: it subscribes to cancels and
// takes calls at once (each waits for the store as any call does), and
// Ready answers as its store does.
func (r *Runtime) StartInBackground(ctx context.Context) {
	if r.cfg.NoPreviousExecutions {
		b := r.Store()
		r.subscribe.Do(func() { b.OnCancel(func(id string) { r.runs.cancel(id, errCancelled) }) })
	} else {
		r.phase.CompareAndSwap(phaseUngated, phaseStarting)
	}
	go r.startLoop(ctx)
}

// startWarnAfter is how long a start may wait for its store before the
// wait is worth a warning. A node of a cluster normally waits a moment
// for an election and for the leader to set the capacity: that is logged
// at INFO, once.
const startWarnAfter = 10 * time.Second

// startLoop runs Start until it succeeds or ctx ends.
func (r *Runtime) startLoop(ctx context.Context) {
	began := time.Now()
	for attempt := 0; ; attempt++ {
		err := r.Start(ctx)
		if err == nil {
			r.cfg.Logger.Info("started: taking calls", slog.String("node_id", r.cfg.NodeID))
			return
		}
		switch waited := time.Since(began); {
		case attempt == 0:
			r.cfg.Logger.Info("waiting for the store before taking calls", slog.Any("reason", err))
		case waited >= startWarnAfter && attempt%5 == 0:
			r.cfg.Logger.Warn("not started yet; retrying", slog.Any("err", err), slog.Duration("waited", waited.Round(time.Second)))
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
	r.runs.close()
	drain, cancel := context.WithTimeout(ctx, r.cfg.DrainTimeout)
	err := r.runs.wait(drain)
	cancel()
	if err != nil {
		r.cfg.Logger.Warn("cancelling tools still running at shutdown", slog.Int("count", r.runs.len()))
		r.runs.cancelAll(errShutdown)
		err = r.runs.wait(ctx)
	}
	r.notes.stop() // pending approval notifications are abandoned
	if bgErr := r.bg.wait(ctx); bgErr != nil {
		err = errors.Join(err, bgErr)
	}
	return err
}
