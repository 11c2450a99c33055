package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/carmyhq/carmy/store"
)

// Approval gates a tool (docs/policy.md#approval-gates): each of its calls
// is reserved awaiting_approval and runs only once an approver (or the
// admin, never the calling principal) approves it, within ExpiresAfter.
type Approval struct {
	// Approvers are the principals who may decide; empty means the admin
	// alone.
	Approvers []string
	// ExpiresAfter is how long a call awaits a decision before it is
	// recorded expired (DefaultApprovalExpiry when zero).
	ExpiresAfter time.Duration
	// Notify, when set, is told of each call reserved awaiting approval
	// (notify.go).
	Notify *ApprovalNotify
}

// DefaultApprovalExpiry is an Approval's ExpiresAfter when it sets none.
const DefaultApprovalExpiry = time.Hour

// The audited decisions on a gated execution.
const (
	ActionApprove = "approve"
	ActionDeny    = "deny"
)

// RequireApproval gates the tool behind an approval (ToolSpec.Approval).
func RequireApproval(a Approval) ToolOption {
	return func(s *ToolSpec) { s.Approval = &a }
}

// checkApproval validates a spec's Approval, filling in its default.
func checkApproval(spec *ToolSpec) error {
	a := spec.Approval
	if a == nil {
		return nil
	}
	switch {
	case a.ExpiresAfter < 0:
		return fmt.Errorf("approval: negative expires_after %s", a.ExpiresAfter)
	case len(a.Approvers) > store.MaxApprovers:
		return fmt.Errorf("approval: %d approvers, at most %d", len(a.Approvers), store.MaxApprovers)
	case spec.Effects == EffectsReadOnly:
		return errors.New("approval: a read_only tool is never reserved, so it cannot await a decision")
	}
	for _, p := range a.Approvers {
		if p == "" || len(p) > store.MaxResolvedBy {
			return fmt.Errorf("approval: approver %q: 1 to %d bytes", p, store.MaxResolvedBy)
		}
	}
	c := *a
	c.Approvers = slices.Clone(a.Approvers)
	if a.Notify != nil {
		n, err := checkNotify(a.Notify)
		if err != nil {
			return err
		}
		c.Notify = n
	}
	if c.ExpiresAfter == 0 {
		c.ExpiresAfter = DefaultApprovalExpiry
	}
	spec.Approval = &c
	return nil
}

// gateOf is the store's gate of a call p of a gated tool, reserved at now.
func gateOf(p *pending, now time.Time) *store.ApprovalGate {
	a := p.tool.Approval
	return &store.ApprovalGate{
		Approvers: slices.Clone(a.Approvers), ExpiresAt: now.Add(a.ExpiresAfter),
		Arguments: p.args, Metadata: p.meta,
	}
}

// CodeApprovalPending is the code an MCP client without tasks is told
// for a call that awaits approval (docs/mcp.md).
const CodeApprovalPending = "APPROVAL_PENDING"

// Decide takes a decision (store.DecisionApprove or store.DecisionDeny)
// on a gated execution, for caller: an approver of it or the admin,
// never its own principal (*ForbiddenError); a caller who is neither
// approver nor admin nor its principal is told store.ErrNotFound, as for
// any execution it may not see. An approval is committed naming this
// node, which then runs the tool through the path of any reserved call
// (its outcome recorded and replayed) and answers with the outcome when
// it comes before ctx ends, else with the running record and ctx's error
// (ErrStillRunning wraps it). A decision on an execution not awaiting
// approval is a *store.StateError carrying the record as it stands. The
// decision is written before anything else: nothing runs unless it
// committed.
func (r *Runtime) Decide(ctx context.Context, caller Caller, id string, kind store.DecisionKind, reason string) (store.Record, error) {
	if kind != store.DecisionApprove && kind != store.DecisionDeny {
		return store.Record{}, invalid("decision", "approve or deny")
	}
	if len(reason) > store.MaxDecisionReason {
		return store.Record{}, invalid("reason", "at most %d bytes", store.MaxDecisionReason)
	}
	rec, err := r.Store().Get(ctx, id)
	if err != nil {
		return store.Record{}, err
	}
	if err := caller.mayDecide(rec); err != nil {
		return store.Record{}, err
	}
	if !rec.Status.Awaiting() {
		return store.Record{}, &store.StateError{Op: string(kind), Record: rec}
	}
	d := store.Decision{Kind: kind, Actor: caller.Principal, Reason: reason, At: r.now(), NodeID: r.cfg.NodeID}
	if kind == store.DecisionDeny {
		return r.decide(ctx, id, d)
	}
	got, rn, p, err := r.approve(ctx, id, d)
	if err != nil || rn == nil {
		return got, err
	}
	resp, err := r.execute(ctx, p, rn, got)
	if err != nil && ctx.Err() != nil {
		return got, fmt.Errorf("%w: %w", ErrStillRunning, err)
	}
	return resp.Record, err
}

// approve writes the approval d of execution id, registered first as
// running on this node (so that a cancel committed right after it reaches
// the tool), and returns the approved record with its run and call, to
// execute; a nil run when nothing is to run (an error, or the record as
// it stands). The approvals of one execution on this node take turns
// until each has its answer from the store: the execution is registered
// once, by the approval that may win, and one that comes after a winner
// reads the record the winner left (a read that follows every write the
// store has acknowledged) and is told it (*store.StateError).
func (r *Runtime) approve(ctx context.Context, id string, d store.Decision) (store.Record, *run, *pending, error) {
	unlock, err := r.approving.lock(ctx, id)
	if err != nil {
		return store.Record{}, nil, nil, fmt.Errorf("approve %s: %w", id, err)
	}
	defer unlock()
	rec, err := r.Store().Get(ctx, id)
	if err != nil {
		return store.Record{}, nil, nil, err
	}
	if !rec.Status.Awaiting() {
		return store.Record{}, nil, nil, &store.StateError{Op: string(d.Kind), Record: rec}
	}
	if r.runs.has(id) {
		// Only the reservation of the call registers it besides, for
		// the moment between its commit and its answer.
		return store.Record{}, nil, nil, fmt.Errorf("approve %s: %w: the call is still being reserved on this node; retry", id, store.ErrUnavailable)
	}
	// The tool must be runnable here before the approval names this node.
	p, err := r.approvedCall(rec)
	if err != nil {
		return store.Record{}, nil, nil, err
	}
	rn, why := r.runs.start(id, p.caller, callBytes(p), r.runLimits())
	if why != refusedNone {
		return store.Record{}, nil, nil, r.busy(why, p.caller)
	}
	got, err := r.decide(ctx, id, d)
	r.runs.answered(id)
	if errors.Is(err, store.ErrCommitUnknown) {
		// The approval may have committed, naming this node: nobody else
		// would run the tool, and this live node would never be found
		// dead. Found out in the background; the approver is told now.
		r.settleApproval(id, d, p, rn)
		return store.Record{}, nil, nil, err
	}
	if err != nil || got.Status != store.StatusRunning {
		r.runs.finish(id)
		return got, nil, nil, err
	}
	return got, rn, p, nil
}

// settleApproval finds out, once the store answers again, whether the
// approval d of execution id, whose commit is unknown, committed: the
// record is then running on this node with d as its decision (no other
// approval names this node with d's actor and time, to the
// microsecond a store keeps), and the tool runs
// here exactly as if the approver had been told, its outcome recorded and
// replayed. Otherwise the registration rn is dropped. It gives up only
// when the node shuts down; the record, if approved, then reads as the
// running execution of a node that is gone (interrupted), never run twice.
func (r *Runtime) settleApproval(id string, d store.Decision, p *pending, rn *run) {
	r.bg.add()
	go func() {
		defer r.bg.done()
		for attempt := 0; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), r.cfg.StoreTimeout)
			rec, err := r.Store().Get(ctx, id)
			cancel()
			switch {
			case err == nil && rec.Status == store.StatusRunning && rec.NodeID == r.cfg.NodeID &&
				rec.Decision != nil && rec.Decision.By == d.Actor &&
				rec.Decision.At.Truncate(time.Microsecond).Equal(d.At.Truncate(time.Microsecond)):
				r.cfg.Logger.Info("an approval whose commit was unknown committed: running the tool",
					slog.String("execution_id", id))
				_, _ = r.execute(context.Background(), p, rn, rec)
				return
			case err == nil, errors.Is(err, store.ErrNotFound):
				r.runs.finish(id)
				return
			case r.isClosing():
				r.runs.finish(id)
				return
			}
			select {
			case <-r.closing:
			case <-time.After(backoff(attempt)):
			}
		}
	}()
}

// ErrStillRunning: an approved execution's tool still runs when the
// approver's wait ended; its outcome will be recorded.
var ErrStillRunning = errors.New("the approved execution is still running")

// decide writes d.
func (r *Runtime) decide(ctx context.Context, id string, d store.Decision) (store.Record, error) {
	wctx, cancel := r.storeContext(store.WithActor(ctx, d.Actor))
	defer cancel()
	return r.Store().Decide(wctx, id, d)
}

// mayDecide authorizes a decision on rec by c.
func (c Caller) mayDecide(rec store.Record) error {
	approver := rec.Approval != nil && slices.Contains(rec.Approval.Approvers, c.Principal)
	switch {
	case rec.Key.Principal == c.Principal:
		return &ForbiddenError{Principal: c.Principal, Tool: rec.Tool, Reason: "a caller may not decide on its own call"}
	case c.Admin || approver:
		return nil
	}
	return store.ErrNotFound
}

// approvedCall rebuilds the call of a gated record from what it keeps
// (its gate's arguments and metadata), as its principal made it, to run
// on this node once approved.
func (r *Runtime) approvedCall(rec store.Record) (*pending, error) {
	t, down, err := r.lookup(rec.Tool)
	if err != nil {
		return nil, err
	}
	if down != nil {
		return nil, down
	}
	p := &pending{
		caller: Caller{Principal: rec.Key.Principal},
		req:    Request{Tool: rec.Tool, RequestID: rec.Key.RequestID, SessionID: rec.Key.Session},
		tool:   t, args: emptyObject, meta: emptyObject, timeout: t.Timeout,
	}
	if g := rec.Approval; g != nil {
		if len(g.Arguments) > 0 {
			p.args = g.Arguments
		}
		if len(g.Metadata) > 0 {
			p.meta = g.Metadata
		}
	}
	p.req.Arguments, p.req.Metadata = p.args, p.meta
	return p, nil
}

// ExpireApprovals records expired for every execution awaiting approval
// whose gate has expired, in pages of at most store.MaxListLimit, and
// returns how many it expired. A decision that loses a race (another
// node's expiry, an approval) is not an error.
func (r *Runtime) ExpireApprovals(ctx context.Context) (int, error) {
	now := r.now()
	n := 0
	q := store.ListQuery{AllPrincipals: true, AllSessions: true, Statuses: []store.Status{store.StatusAwaitingApproval}, Limit: store.MaxListLimit}
	for {
		page, err := r.Store().List(ctx, q)
		if err != nil {
			return n, fmt.Errorf("expire approvals: %w", err)
		}
		for _, rec := range page.Records {
			if rec.Approval == nil || now.Before(rec.Approval.ExpiresAt) {
				continue
			}
			d := store.Decision{Kind: store.DecisionExpire, Actor: r.cfg.NodeID, At: now}
			_, err := r.decide(ctx, rec.ExecutionID, d)
			switch {
			case err == nil:
				n++
			case errors.Is(err, store.ErrInvalidState), errors.Is(err, store.ErrNotFound):
			default:
				return n, fmt.Errorf("expire approvals: %s: %w", rec.ExecutionID, err)
			}
		}
		if page.Next == 0 {
			return n, nil
		}
		q.Before = page.Next
	}
}

// RunApprovalExpiry calls ExpireApprovals every period until ctx ends,
// when leading() reports true (the node that runs the reconcile probes:
// the Raft leader, a PostgreSQL fleet's prober; the writes are
// conditional, so two nodes that both believe it do no harm). Errors are
// logged and the next period tries again.
func (r *Runtime) RunApprovalExpiry(ctx context.Context, period time.Duration, leading func() bool) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if leading != nil && !leading() {
			continue
		}
		if n, err := r.ExpireApprovals(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("expiring approvals", slog.Any("error", err))
		} else if n > 0 {
			r.cfg.Logger.Info("approvals expired", slog.Int("count", n))
		}
	}
}
