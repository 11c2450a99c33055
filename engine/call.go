package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/carmyhq/carmy/internal/tracing"
	"github.com/carmyhq/carmy/store"
)

// DerivedRequestPrefix begins the request_id of the identity a call
// without one takes under its tool's dedupe window (docs/mcp.md#calls-without-a-request-id-dedupe_window), followed
// by the first 32 hex digits of the call's fingerprint. A caller's own
// request_id may not begin with it.
const DerivedRequestPrefix = store.DerivedPrefix

// derivedHexDigits is how much of the fingerprint a derived request_id
// holds: 128 bits.
const derivedHexDigits = 32

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
	// CanonicalArguments, when not nil, is the RFC 8785 canonical form of
	// Arguments (store/jcs's; empty when Arguments is), and
	// CanonicalMetadata that of Metadata: from a decoder that made them
	// while it checked the body (package api's), so that the fingerprint
	// does not canonicalise the arguments a second time
	// (store.FingerprintCanonical). The caller vouches for them: bytes
	// that are not the canonical forms give a fingerprint no retry
	// matches. Nil: the runtime canonicalises Arguments and Metadata
	// itself (store.Fingerprint). The tool sees Arguments, never these.
	CanonicalArguments, CanonicalMetadata json.RawMessage
	// Timeout, when positive, lowers the tool's timeout.
	Timeout time.Duration
	// Task asks that a call without RequestID be recorded all the same
	// (an MCP task, docs/mcp.md#long-calls-tasks): its request_id is then its execution id,
	// so that the execution can be polled and replayed. A tool's dedupe
	// window, when it has one, decides the identity instead. A
	// RequireRequestID tool still refuses a call without one.
	Task bool
	// OnReserved, when set, is told the record of a new execution once
	// its reservation has committed, before the tool runs (and, for a
	// call that is not recorded, once it is registered to run). It is
	// called at most once, from the goroutine that called Call, and must
	// not block. A replay, a refusal or an uncertain identity never
	// calls it.
	OnReserved func(store.Record)
	// OnSent, when set, is told once the tool's request has started to
	// leave this node (sent.go): at once when a tool that does not mark
	// it itself (ToolSpec.MarksSent) is invoked; else when the tool calls
	// MarkSent, or returns with anything but ErrNotSent. It is called at
	// most once, after OnReserved, from any goroutine, and must not block.
	// A call whose tool does not run, or whose request is never sent,
	// never calls it. Only the callers that wait for it set it: a call
	// without it pays nothing.
	OnSent func()
	// Progress, when set, receives the progress the tool reports
	// (ReportProgress) while it runs on this node; it must not block.
	Progress func(Progress)
}

// Response is the answer to a call: the execution's record and whether it
// is a replay of an earlier execution.
type Response struct {
	Record   store.Record
	Replayed bool
	// Passthrough says that the call ran directly, neither reserved nor
	// recorded, because its tool is EffectsReadOnly: Record is the outcome
	// of this run alone, and no retry will see it.
	Passthrough bool
	// Awaiting says that the call's execution awaits a decision (its tool
	// is gated, ToolSpec.Approval): Record is awaiting_approval, the tool
	// has not run, and every retry is answered so until the decision.
	Awaiting bool
}

// fingerprint is the call's fingerprint: from the canonical forms the
// caller made when it made them, else from the arguments and metadata.
func fingerprint(req Request, p *pending) (string, error) {
	if req.CanonicalArguments != nil {
		return store.FingerprintCanonical(req.Tool, req.CanonicalArguments, req.CanonicalMetadata)
	}
	return store.Fingerprint(req.Tool, p.args, p.meta)
}

// Call runs req for caller with at-most-once semantics when req has a
// request_id, and answers with the recorded outcome.
//
// Call decides what the rules and the caller allow before anything is
// reserved (validate.go); then it answers a retry of a finished record
// from the backend's local state when it can (Backend.PeekFinished, the one
// pre-check: a finished record never changes); then the store's Reserve
// decides authoritatively. While the tool's group is unavailable
// (group.go), the record the store holds answers in Reserve's place
// (replay, conflict, uncertain), and a call it does not answer, which
// would run the tool, is refused with the group's error: nothing is
// reserved.
//
// Errors carry the error codes of docs/errors.md: *ForbiddenError (FORBIDDEN: the tool is
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
	p.trace = tracing.Parent(ctx)
	if err := r.gate(); err != nil {
		return Response{}, err
	}
	if p.tool.Effects == EffectsReadOnly && !req.Task {
		// Nothing to reserve or record (docs/policy.md).
		if p.down != nil {
			return Response{}, p.down
		}
		resp, err := r.runUnrecorded(ctx, p)
		resp.Passthrough = err == nil
		return resp, err
	}
	var window time.Duration // the dedupe window of a call without request_id
	var taskID string        // the execution id a task's request_id is
	if req.RequestID == "" && p.tool.Approval != nil && !req.Task {
		return Response{}, invalid("request_id", "tool %q needs approval before it runs: a call needs a request_id to come back to", p.tool.Name)
	}
	if req.RequestID == "" {
		switch {
		case p.tool.DedupeWindow > 0:
			window = p.tool.DedupeWindow
		case p.down != nil:
			// A new identity, or none: only the tool could answer it.
			return Response{}, p.down
		case req.Task:
			taskID = NewExecutionID(r.now())
			req.RequestID, p.req.RequestID = taskID, taskID
		default:
			return r.runUnrecorded(ctx, p)
		}
	}
	fp, err := fingerprint(req, p)
	if err != nil {
		return Response{}, err
	}
	if window > 0 {
		// The derived identity (docs/mcp.md#calls-without-a-request-id-dedupe_window); the tool sees it, and the
		// answer carries it.
		req.RequestID = DerivedRequestPrefix + fp[:derivedHexDigits]
		p.req.RequestID = req.RequestID
	}
	key := store.Key{Principal: caller.Principal, Session: req.SessionID, RequestID: req.RequestID}
	st := r.Store()
	now := r.now()
	// The caller's quotas travel with the reservation, so every replica
	// applies this node's bounds alike. The headroom asks for room for the
	// largest result this node records, so that an accepted reservation
	// normally has room for its outcome. So does the dedupe window,
	// decided from now, stamped here, against the record's stamped start.
	exec := store.Execution{
		Tool: req.Tool, NodeID: r.cfg.NodeID, StartedAt: now, DedupeWindow: window, RetryUncertain: p.tool.RetryUncertain,
		Quota: caller.MaxEntries, ByteQuota: caller.MaxBytes, Headroom: int64(r.cfg.MaxResultBytes),
	}
	if p.tool.Approval != nil {
		exec.Approval = gateOf(p, now)
	}
	// The one replay pre-check before the store decides. A record the
	// window has expired goes to the store, which replaces it.
	if rec, ok := st.PeekFinished(key); ok {
		if out := exec.Held(rec, fp); out != store.Reserved {
			return answerHeld(out, rec)
		}
	}
	if p.down != nil {
		return r.heldOrDown(ctx, key, fp, exec, p.down)
	}
	exec.ID = taskID
	if exec.ID == "" {
		exec.ID = NewExecutionID(now)
	}

	// Register before proposing, so a cancel that commits right after the
	// reservation reaches the tool.
	rn, why := r.runs.start(exec.ID, caller, callBytes(p), r.runLimits())
	if why != refusedNone {
		return Response{}, r.busy(why, caller)
	}
	wctx, cancel := r.storeContext(ctx)
	wctx, span := tracing.Start(wctx, tracing.SpanReserve)
	start := time.Now()
	res, err := st.Reserve(wctx, key, fp, exec)
	cancel()
	r.runs.answered(exec.ID)
	r.obs.StoreWrite(StoreReserve, reserveOutcome(res.Outcome, err), time.Since(start))
	tracing.End(span, tracing.AttrOutcome, reserveOutcome(res.Outcome, err), err)
	if err != nil || res.Outcome != store.Reserved {
		r.runs.finish(exec.ID)
	}
	if err != nil {
		return Response{}, r.reserveFailed(key, exec, err)
	}
	if res.Outcome == store.Reserved && res.Record.Status.Awaiting() {
		// Gated: nothing runs until a decision (approval.go).
		r.runs.finish(exec.ID)
		r.notifyApproval(p.tool, res.Record)
		return Response{Record: res.Record, Awaiting: true}, nil
	}
	if res.Outcome == store.Reserved {
		if req.OnReserved != nil {
			req.OnReserved(res.Record)
		}
		return r.execute(ctx, p, rn, res.Record)
	}
	return answerHeld(res.Outcome, res.Record)
}

// answerHeld is the answer to a call whose identity the store holds as
// rec, out being Reserve's word on it (or store.Execution.Held's): a
// replay, a *store.ConflictError or a *store.UncertainError.
func answerHeld(out store.Outcome, rec store.Record) (Response, error) {
	switch out {
	case store.Replay:
		return Response{Record: rec, Replayed: true}, nil
	case store.Conflict:
		return Response{}, &store.ConflictError{Record: rec}
	case store.Uncertain:
		return Response{}, &store.UncertainError{Record: rec}
	case store.Awaiting:
		return Response{Record: rec, Awaiting: true}, nil
	}
	return Response{}, fmt.Errorf("reserve: unexpected outcome %v", out)
}

// heldOrDown answers a call of a tool whose group is unavailable (down)
// that the peek did not answer: from the record the store holds under
// key, as Reserve would (a backend that peeks nothing, a running or
// interrupted record); else, when the call would reserve (no record, or
// one its dedupe window lets it replace), with down. It writes nothing.
func (r *Runtime) heldOrDown(ctx context.Context, key store.Key, fp string, exec store.Execution, down error) (Response, error) {
	rec, err := r.Store().Lookup(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Response{}, down
	case err != nil:
		return Response{}, fmt.Errorf("%w (its record could not be read either: %v)", down, err)
	}
	if out := exec.Held(rec, fp); out != store.Reserved {
		return answerHeld(out, rec)
	}
	return Response{}, down
}

// Overloaded returns the *BusyError a call whose arguments are about size
// bytes would be refused with now for the node's load (its bound on bytes
// in flight, or its writes waiting too long), or nil. It reserves and
// counts nothing, so a caller may refuse a large call before even reading
// it; Call decides again, authoritatively. Replays are refused alike: a
// node past its bounds takes no large request.
func (r *Runtime) Overloaded(size int64) error {
	if why := r.runs.wouldRefuse(size, r.runLimits()); why != refusedNone {
		return r.busy(why, Caller{})
	}
	return nil
}

// storeContext bounds one store write by StoreTimeout. The write does not
// inherit ctx's cancellation: a caller that goes away must not leave a
// write whose outcome is unknown.
func (r *Runtime) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.cfg.StoreTimeout)
}

// reserveFailed handles a Reserve error. The tool has not started. When the
// reservation may have been made anyway, it is released in the background,
// so the identity is not left uncertain for good. An UNAVAILABLE answer
// says the tool did not run (notReservedError).
func (r *Runtime) reserveFailed(key store.Key, exec store.Execution, err error) error {
	if errors.Is(err, store.ErrCapacity) || errors.Is(err, store.ErrInvalid) {
		return fmt.Errorf("reserve: %w", err)
	}
	if errors.Is(err, store.ErrUnavailable) {
		return &notReservedError{fmt.Errorf("reserve: %w; the tool did not run and nothing was reserved: retry later with the same request_id", err)}
	}
	r.releaseInBackground(key, exec.ID)
	return &notReservedError{fmt.Errorf("reserve: %w (%w; the tool did not run)", store.ErrUnavailable, err)}
}

// runUnrecorded runs a call without request_id, or of a read-only tool: no
// reservation, no record. The answer's record carries the call's
// request_id, if any.
func (r *Runtime) runUnrecorded(ctx context.Context, p *pending) (Response, error) {
	now := r.now()
	rec := store.Record{
		ExecutionID: NewExecutionID(now),
		Key:         store.Key{Principal: p.caller.Principal, Session: p.req.SessionID, RequestID: p.req.RequestID},
		Tool:        p.tool.Name,
		NodeID:      r.cfg.NodeID,
		StartedAt:   now,
		Status:      store.StatusRunning,
	}
	rn, why := r.runs.start(rec.ExecutionID, p.caller, callBytes(p), r.runLimits())
	if why != refusedNone {
		return Response{}, r.busy(why, p.caller)
	}
	r.runs.answered(rec.ExecutionID) // nothing to reserve, nor to record
	if p.req.OnReserved != nil {
		p.req.OnReserved(rec)
	}
	type ran struct {
		rec  store.Record
		fate error
	}
	done := make(chan ran, 1)
	go func() {
		defer r.runs.finish(rec.ExecutionID)
		res, fate := r.invoke(rn, p, rec)
		if errors.Is(fate, ErrAnswerLost) {
			// Nothing is recorded to reconcile: the caller is told what is
			// known, as a failure that says the effect may have happened.
			res.Status, res.FinishedAt = store.StatusFailed, r.now()
			res.Error = errorBody(&ToolError{Code: CodeUpstreamUnreachable, Message: fmt.Sprintf(
				"tool %s: %v; the effect may have happened (the call had no request_id, so nothing was recorded)", p.tool.Name, fate)})
		}
		rec.Status, rec.Data, rec.Error, rec.FinishedAt = res.Status, res.Data, res.Error, res.FinishedAt
		r.runs.finish(rec.ExecutionID) // the slot is free before the caller hears
		done <- ran{rec, fate}
	}()
	select {
	case got := <-done:
		if errors.Is(got.fate, ErrNotSent) {
			return Response{}, notSentAnswer(p.tool.Name, got.fate)
		}
		return Response{Record: got.rec}, nil
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
}

// runLimits returns the bounds of the running set.
func (r *Runtime) runLimits() runLimits {
	lim := runLimits{total: r.cfg.MaxRunning, share: r.cfg.MaxRunningPerPrincipal, bytes: r.cfg.MaxInflightBytes}
	if lim.bytes > 0 {
		lim.slow = r.cfg.StoreTimeout / slowShare
	}
	return lim
}

// slowShare: with a bound on bytes in flight, new calls are also refused
// while a reservation or a result of a call on this node has waited for
// the store longer than StoreTimeout/4
// (2.5 s by default). The bound on bytes keeps memory bounded; this keeps
// the queue of outcomes short enough that each is recorded well within
// its caller's wait (docs/operations.md#overload: no "ran but not recorded" from load), on a
// host whose throughput the bytes alone do not tell.
const slowShare = 4

// callBytes is what a call holds in flight from its start: its arguments
// and metadata.
func callBytes(p *pending) int64 { return int64(len(p.args) + len(p.meta)) }

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
	case refusedBytes:
		return &BusyError{Limit: LimitMaxInflightBytes, N: int(r.cfg.MaxInflightBytes)}
	case refusedSlow:
		return &BusyError{Limit: LimitSlowOutcomes, N: int(r.cfg.StoreTimeout / slowShare / time.Millisecond)}
	}
	return &BusyError{Limit: LimitMaxRunning, N: r.cfg.MaxRunning}
}
