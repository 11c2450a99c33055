package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/carmyhq/carmy/store"
)

// Execution returns the record of an execution the caller may see: its own,
// or any for an admin, of a tool the caller may call (Caller.Tools).
// Another's is store.ErrNotFound, so ids cannot be probed. It reads the
// store once: Cancel and Resolve authorize with it, then act.
func (r *Runtime) Execution(ctx context.Context, caller Caller, id string) (store.Record, error) {
	rec, err := r.Store().Get(ctx, id)
	if err != nil {
		return store.Record{}, err
	}
	if !caller.maySee(rec) {
		return store.Record{}, store.ErrNotFound
	}
	return rec, nil
}

// Lookup returns the record of an identity. The principal is the caller's.
func (r *Runtime) Lookup(ctx context.Context, caller Caller, session, requestID string) (store.Record, error) {
	if err := checkRequestID(requestID); err != nil {
		return store.Record{}, err
	}
	if err := checkSessionID(session); err != nil {
		return store.Record{}, err
	}
	rec, err := r.Store().Lookup(ctx, store.Key{Principal: caller.Principal, Session: session, RequestID: requestID})
	if err != nil {
		return store.Record{}, err
	}
	if !caller.MayCall(rec.Tool) {
		return store.Record{}, store.ErrNotFound
	}
	return rec, nil
}

// Cancel records cancelled for a running execution the caller may see
// (else store.ErrNotFound) and cancels its tool (here, or through the
// store's notification on the node that runs it). Whatever the tool
// returns afterwards is discarded. It reads the execution once, to
// authorize, then writes; the store refuses a status that does not allow
// a cancel (*store.StateError).
func (r *Runtime) Cancel(ctx context.Context, caller Caller, id string) (store.Record, error) {
	if _, err := r.Execution(ctx, caller, id); err != nil {
		return store.Record{}, err
	}
	res := store.Result{
		ExecutionID: id, Status: store.StatusCancelled, FinishedAt: r.now(),
		Error: errorBody(&ToolError{Code: CodeCancelled, Message: fmt.Sprintf("cancelled by %s", caller.Principal)}),
	}
	wctx, cancel := r.storeContext(store.WithActor(ctx, caller.Principal))
	defer cancel()
	rec, err := r.Store().Cancel(wctx, id, res)
	if err != nil {
		return store.Record{}, err
	}
	r.runs.cancel(id, errCancelled)
	return rec, nil
}

// Resolution is an outcome a caller established for an interrupted
// execution (docs/api.md#reconciling-cancel-and-resolve).
type Resolution struct {
	// Status is "completed", "failed" or ResolutionReleased.
	Status string
	Data   json.RawMessage
	// Error is the failed outcome's error object, with "code" and "message".
	Error json.RawMessage
}

// ResolutionReleased is the Resolution status that removes a reservation.
const ResolutionReleased = "released"

// Resolve settles an interrupted execution the caller may see (else
// store.ErrNotFound), or a running one whose runner is gone. It returns
// the record as it now stands; for "released", the removed record. A
// malformed res is refused before anything is read. It reads the
// execution once, to authorize and to tell whether its runner is gone,
// then writes.
func (r *Runtime) Resolve(ctx context.Context, caller Caller, id string, res Resolution) (store.Record, error) {
	if err := validateResolution(res); err != nil {
		return store.Record{}, err
	}
	rec, err := r.Execution(ctx, caller, id)
	if err != nil {
		return store.Record{}, err
	}
	allowRunning := r.runnerGone(rec)
	wctx, cancel := r.storeContext(store.WithActor(ctx, caller.Principal))
	defer cancel()
	if res.Status == ResolutionReleased {
		rec, err = r.Store().Release(wctx, id, allowRunning)
	} else {
		rec, err = r.Store().Resolve(wctx, id, store.Resolution{
			Result: store.Result{
				ExecutionID: id, Status: store.Status(res.Status), Data: res.Data, Error: res.Error, FinishedAt: r.now(),
			},
			AllowRunning: allowRunning,
			By:           caller.Principal,
		})
	}
	if err != nil {
		return store.Record{}, err
	}
	return rec, nil
}

// runnerGone reports whether rec's runner is known to be gone: it is this
// node and the execution does not run here, or the cluster says so.
func (r *Runtime) runnerGone(rec store.Record) bool {
	if rec.Status != store.StatusRunning {
		return false
	}
	if rec.NodeID == r.cfg.NodeID {
		return !r.runs.has(rec.ExecutionID)
	}
	return r.nodeGone(r.Store(), rec.NodeID)
}

// nodeGone reports whether the runner of another node is known to be
// gone, as the backend's Liveness says (never, for one process's). This
// node's runner is not gone: whether one of its executions still runs is
// runnerGone's question.
func (r *Runtime) nodeGone(l Liveness, nodeID string) bool {
	return nodeID != r.cfg.NodeID && l.RunnerGone(nodeID)
}

// releaseInBackground releases this node's reservation for exec, whose tool
// never started, retrying until the store answers. A record that belongs
// to another execution, or none, is left alone.
func (r *Runtime) releaseInBackground(key store.Key, execID string) {
	r.bg.add()
	go func() {
		defer r.bg.done()
		for attempt := 0; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), r.cfg.StoreTimeout)
			_, err := r.Store().Release(ctx, execID, true)
			cancel()
			var se *store.StateError
			switch {
			case err == nil:
				r.cfg.Logger.Info("released a reservation whose tool never started",
					slog.String("execution_id", execID), slog.String("key", key.String()))
				return
			case errors.Is(err, store.ErrNotFound), errors.As(err, &se):
				return
			case r.isClosing():
				r.cfg.Logger.Warn("shutting down before releasing a reservation; it will read as interrupted",
					slog.String("execution_id", execID), slog.Any("err", err))
				return
			}
			select {
			case <-r.closing:
			case <-time.After(backoff(attempt)):
			}
		}
	}()
}
