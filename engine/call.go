package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/carmyhq/carmy/store"
)

// Request is one call of a tool.
type Request struct {
	Tool string
	// Arguments must be a JSON object; empty means {}.
	Arguments json.RawMessage
	// RequestID, when set, makes the call idempotent.
	RequestID string
	SessionID string
	// Metadata must be a JSON object; empty means {}. It is part of the
	// fingerprint.
	Metadata json.RawMessage
	// Timeout, when positive, lowers the tool's timeout.
	Timeout time.Duration
}

// Response is the answer to a call: the execution's record and whether it
// is a replay of an earlier execution.
type Response struct {
	Record   store.Record
	Replayed bool
}

// Call runs req for caller with at-most-once semantics when req has a
// request_id, and answers with the recorded outcome.
//
// Call decides what the rules and the caller allow before anything is
// reserved (validate.go); then it answers a retry of a finished record
// from the store's local state when the store is a store.Peeker (the one
// pre-check: a finished record never changes); then the store's Reserve
// decides authoritatively.
//
// Errors carry SPEC §2.2 codes: *ForbiddenError (FORBIDDEN: the tool is
// outside caller.Tools), ErrUnknownTool, *store.FieldError
// (INVALID_REQUEST), *store.ConflictError, *store.UncertainError,
// store.ErrCapacity (a *store.QuotaError when caller.MaxEntries > 0 and the
// principal holds that many records, or when caller.MaxBytes > 0 and the
// new record and MaxResultBytes do not fit in what it has left; a
// *store.CapacityError when they do not fit in the store's bound on
// bytes: a new identity is refused, a held one is answered as ever),
// *BusyError (UNAVAILABLE: this node runs its limit of tools, or the
// caller its share), store.ErrUnavailable (the tool did not run, or ran
// but its outcome is not yet recorded: the message says which). When ctx
// ends first, Call returns ctx's error while the tool runs on and its
// outcome is recorded.
func (r *Runtime) Call(ctx context.Context, caller Caller, req Request) (Response, error) {
	p, err := r.validate(caller, req)
	if err != nil {
		return Response{}, err
	}
	if err := r.gate(); err != nil {
		return Response{}, err
	}
	if req.RequestID == "" {
		return r.runUnrecorded(ctx, p)
	}
	fp, err := store.Fingerprint(req.Tool, p.args, p.meta)
	if err != nil {
		return Response{}, err
	}
	key := store.Key{Principal: caller.Principal, Session: req.SessionID, RequestID: req.RequestID}
	st := r.Store()
	// The one replay pre-check before the store decides.
	if pk, ok := st.(store.Peeker); ok {
		if rec, ok := pk.PeekFinished(key); ok {
			if rec.Fingerprint == fp {
				return Response{Record: rec, Replayed: true}, nil
			}
			return Response{}, &store.ConflictError{Record: rec}
		}
	}
	now := r.now()
	// The caller's quotas travel with the reservation, so every replica
	// applies this node's bounds alike. The headroom asks for room for the
	// largest result this node records, so that an accepted reservation
	// normally has room for its outcome.
	exec := store.Execution{
		ID: NewExecutionID(now), Tool: req.Tool, NodeID: r.cfg.NodeID, StartedAt: now,
		Quota: caller.MaxEntries, ByteQuota: caller.MaxBytes, Headroom: int64(r.cfg.MaxResultBytes),
	}

	// Register before proposing, so a cancel that commits right after the
	// reservation reaches the tool.
	rn, why := r.runs.start(exec.ID, caller, r.runLimits())
	if why != refusedNone {
		return Response{}, r.busy(why, caller)
	}
	wctx, cancel := r.storeContext(ctx)
	start := time.Now()
	res, err := st.Reserve(wctx, key, fp, exec)
	cancel()
	r.obs.StoreWrite(StoreReserve, reserveOutcome(res.Outcome, err), time.Since(start))
	if err != nil || res.Outcome != store.Reserved {
		r.runs.finish(exec.ID)
	}
	if err != nil {
		return Response{}, r.reserveFailed(key, exec, err)
	}
	switch res.Outcome {
	case store.Replay:
		return Response{Record: res.Record, Replayed: true}, nil
	case store.Conflict:
		return Response{}, &store.ConflictError{Record: res.Record}
	case store.Uncertain:
		return Response{}, &store.UncertainError{Record: res.Record}
	case store.Reserved:
		return r.execute(ctx, p, rn, res.Record)
	}
	return Response{}, fmt.Errorf("reserve: unexpected outcome %v", res.Outcome)
}

// storeContext bounds one store write by StoreTimeout. The write does not
// inherit ctx's cancellation: a caller that goes away must not leave a
// write whose outcome is unknown.
func (r *Runtime) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.cfg.StoreTimeout)
}

// reserveFailed handles a Reserve error. The tool has not started. When the
// reservation may have been made anyway, it is released in the background,
// so the identity is not left uncertain for good.
func (r *Runtime) reserveFailed(key store.Key, exec store.Execution, err error) error {
	if errors.Is(err, store.ErrCapacity) || errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrUnavailable) {
		return fmt.Errorf("reserve: %w", err)
	}
	r.releaseInBackground(key, exec.ID)
	return fmt.Errorf("reserve: %w (%w; the tool did not run)", store.ErrUnavailable, err)
}

// runUnrecorded runs a call without request_id: no reservation, no record.
func (r *Runtime) runUnrecorded(ctx context.Context, p *pending) (Response, error) {
	now := r.now()
	rec := store.Record{
		ExecutionID: NewExecutionID(now),
		Key:         store.Key{Principal: p.caller.Principal, Session: p.req.SessionID},
		Tool:        p.tool.Name,
		NodeID:      r.cfg.NodeID,
		StartedAt:   now,
		Status:      store.StatusRunning,
	}
	rn, why := r.runs.start(rec.ExecutionID, p.caller, r.runLimits())
	if why != refusedNone {
		return Response{}, r.busy(why, p.caller)
	}
	done := make(chan store.Record, 1)
	go func() {
		defer r.runs.finish(rec.ExecutionID)
		res := r.invoke(rn, p, rec)
		rec.Status, rec.Data, rec.Error, rec.FinishedAt = res.Status, res.Data, res.Error, res.FinishedAt
		done <- rec
	}()
	select {
	case rec := <-done:
		return Response{Record: rec}, nil
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
}

// runLimits returns the bounds of the running set.
func (r *Runtime) runLimits() runLimits {
	return runLimits{total: r.cfg.MaxRunning, share: r.cfg.MaxRunningPerPrincipal}
}

// busy is the answer to a call that the running set refused (why): it
// would run more tools at once than MaxRunning allows, or than the
// caller's share (MaxRunningPerPrincipal), or it would take a slot kept
// for admins; or it comes after shutdown closed the running set. Nothing
// was reserved and the tool did not run.
func (r *Runtime) busy(why refusal, caller Caller) error {
	if ro, ok := r.obs.(RefusalObserver); ok && why != refusedClosed {
		ro.Refused(why.reason())
	}
	switch why {
	case refusedClosed:
		return ErrClosed
	case refusedShare:
		return &BusyError{Principal: caller.Principal, Limit: LimitMaxRunningPerPrincipal, N: r.cfg.MaxRunningPerPrincipal}
	case refusedAdminReserve:
		return &BusyError{Principal: caller.Principal, Limit: LimitAdminReserve, N: r.cfg.MaxRunning - adminReserve(r.cfg.MaxRunning, r.cfg.MaxRunningPerPrincipal)}
	}
	return &BusyError{Limit: LimitMaxRunning, N: r.cfg.MaxRunning}
}
