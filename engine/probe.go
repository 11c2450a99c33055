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

// Reconcile probes (docs/config.md#reconcile-probes). A tool may say how to find out whether an
// uncertain execution's effect happened: its Probe asks the upstream
// ("did key K happen?"), and the runtime settles interrupted executions by
// the answer instead of leaving them to a person.

// ProbeCall is what a probe is asked about: one interrupted execution of
// its tool.
type ProbeCall struct {
	Tool           string
	ExecutionID    string
	RequestID      string
	IdempotencyKey string
	FencingToken   uint64
}

// ProbeAnswer is a probe's decided answer. Found: the effect happened,
// and Data (JSON, within MaxResultBytes) is its outcome, recorded as
// completed. Not found: it never happened, and the reservation is
// released, so the next retry runs the tool.
type ProbeAnswer struct {
	Found bool
	Data  json.RawMessage
}

// ProbeFunc asks an upstream about c. An error means no decided answer
// (the upstream could not be reached, or answered something else): the
// probe is tried again later. It must honour ctx.
type ProbeFunc func(ctx context.Context, c ProbeCall) (ProbeAnswer, error)

// DefaultProbeGiveUp is how long after an execution started its probe is
// tried, unless its ToolSpec says otherwise.
const DefaultProbeGiveUp = 24 * time.Hour

// The probe's schedule: every probeScan the interrupted executions are
// listed; each one's probe is tried at once, then after a pause of
// probeMinWait doubling to probeMaxWait while the answer is undecided.
const (
	probeScan    = time.Second
	probeMinWait = time.Second
	probeMaxWait = time.Minute
	// probePage bounds one listing of interrupted executions.
	probePage = 500
)

// The outcomes of a probe, as ProbeObserver names them.
const (
	ProbeCompleted = "completed" // found: resolved completed
	ProbeReleased  = "released"  // not found: the reservation released
	ProbeUndecided = "undecided" // no decided answer: tried again
	ProbeGaveUp    = "gave_up"   // past its give-up time: left to a person
	ProbeSettled   = "settled"   // decided, but the execution was no longer interrupted
)

// ProbeObserver is implemented by Observers that also count probes, by
// tool and outcome (Probe*).
type ProbeObserver interface {
	Probed(tool, outcome string)
}

// probeState is what the prober remembers of one execution.
type probeState struct {
	next   time.Time
	wait   time.Duration
	gaveUp bool
}

// RunProbes settles interrupted executions whose tool has a Probe, until
// ctx ends. It lists them every second, while owner reports true (nil:
// always), and asks each one's probe at once, then again with a pause of
// 1 s doubling to 1 min while the answer is undecided, for at most the
// tool's ProbeGiveUp after the execution started. A decided answer is
// committed only if the execution is still interrupted: completed with
// the probe's data and resolved_by "probe", or released.
//
// One node of a cluster should probe at a time (owner: it leads), so that
// an execution is asked about once; two that overlap, as leadership
// changes, still settle it once, since the store applies only the first
// resolution of an interrupted execution.
func (r *Runtime) RunProbes(ctx context.Context, owner func() bool) {
	states := map[string]*probeState{}
	tick := time.NewTicker(probeScan)
	defer tick.Stop()
	for {
		if r.hasProbes() && (owner == nil || owner()) {
			r.probeRound(ctx, states)
		} else {
			clear(states)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// hasProbes reports whether a registered tool has a probe: without one
// there is nothing to list.
func (r *Runtime) hasProbes() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, t := range r.tools {
		if t.Probe != nil {
			return true
		}
	}
	return false
}

// SetProbeOwner installs the function that tells RunProbes whether this
// node probes now (a cluster: while it leads). Without one, it always does.
func (r *Runtime) SetProbeOwner(owner func() bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.probeOwner = owner
}

// ProbeOwner returns the function SetProbeOwner installed, or nil.
func (r *Runtime) ProbeOwner() func() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.probeOwner
}

// probeRound lists the interrupted executions and probes those due, one
// at a time (a probe is a small request, and rare).
func (r *Runtime) probeRound(ctx context.Context, states map[string]*probeState) {
	seen := map[string]bool{}
	q := store.ListQuery{AllPrincipals: true, AllSessions: true, Statuses: []store.Status{store.StatusInterrupted}, Limit: probePage}
	for {
		lctx, cancel := context.WithTimeout(ctx, r.cfg.StoreTimeout)
		page, err := r.Store().List(lctx, q)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logger.Debug("reconcile probes: listing interrupted executions", slog.Any("err", err))
			}
			return
		}
		for _, rec := range page.Records {
			seen[rec.ExecutionID] = true
			r.probeOne(ctx, rec, states)
			if ctx.Err() != nil {
				return
			}
		}
		if page.Next == 0 {
			break
		}
		q.Before = page.Next
	}
	for id := range states {
		if !seen[id] {
			delete(states, id)
		}
	}
}

// probeOne probes rec if its tool has a probe and it is due.
func (r *Runtime) probeOne(ctx context.Context, rec store.Record, states map[string]*probeState) {
	t, down, err := r.lookup(rec.Tool)
	if err != nil || down != nil || t.Probe == nil {
		return
	}
	st := states[rec.ExecutionID]
	if st == nil {
		st = &probeState{wait: probeMinWait}
		states[rec.ExecutionID] = st
	}
	now := time.Now()
	if st.gaveUp || now.Before(st.next) {
		return
	}
	giveUp := t.ProbeGiveUp
	if giveUp <= 0 {
		giveUp = DefaultProbeGiveUp
	}
	if now.Sub(rec.StartedAt) > giveUp {
		st.gaveUp = true
		r.probed(rec, ProbeGaveUp)
		r.cfg.Logger.Warn("reconcile probe: gave up; the execution stays interrupted until a person resolves it",
			slog.String("tool", rec.Tool), slog.String("execution_id", rec.ExecutionID), slog.Duration("give_up_after", giveUp))
		return
	}
	c := ProbeCall{Tool: rec.Tool, ExecutionID: rec.ExecutionID, RequestID: rec.Key.RequestID,
		IdempotencyKey: rec.Key.IdempotencyKey(), FencingToken: rec.Seq}
	pctx, cancel := context.WithTimeout(ctx, t.Timeout)
	ans, err := r.askProbe(pctx, t, c)
	cancel()
	if err == nil {
		err = r.settleByProbe(ctx, rec, ans)
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		st.next, st.wait = now.Add(st.wait), min(2*st.wait, probeMaxWait)
		r.probed(rec, ProbeUndecided)
		r.cfg.Logger.Info("reconcile probe: no decided answer; trying again", slog.String("tool", rec.Tool),
			slog.String("execution_id", rec.ExecutionID), slog.Duration("retry_in", st.next.Sub(now)), slog.Any("err", err))
		return
	}
	delete(states, rec.ExecutionID)
}

// askProbe runs t's probe, recovering a panic, and checks a found answer's
// data.
func (r *Runtime) askProbe(ctx context.Context, t *tool, c ProbeCall) (ans ProbeAnswer, err error) {
	defer func() {
		if v := recover(); v != nil {
			ans, err = ProbeAnswer{}, fmt.Errorf("the probe panicked: %v", v)
		}
	}()
	ans, err = t.Probe(ctx, c)
	if err != nil || !ans.Found {
		return ans, err
	}
	if len(ans.Data) == 0 {
		ans.Data = json.RawMessage("null")
	}
	data, err := compact(ans.Data)
	switch {
	case err != nil:
		return ProbeAnswer{}, fmt.Errorf("the probe's data is not JSON: %w", err)
	case len(data) > r.cfg.MaxResultBytes:
		return ProbeAnswer{}, fmt.Errorf("the probe's data is %d bytes, over the limit of %d", len(data), r.cfg.MaxResultBytes)
	}
	ans.Data = data
	return ans, nil
}

// settleByProbe commits a probe's decided answer for rec: resolved
// completed, or released. An execution no longer interrupted (settled
// meanwhile) is left as it is. An error is the store's: tried again.
func (r *Runtime) settleByProbe(ctx context.Context, rec store.Record, ans ProbeAnswer) error {
	wctx, cancel := r.storeContext(store.WithActor(ctx, store.ResolvedByProbe))
	defer cancel()
	var err error
	outcome := ProbeReleased
	if ans.Found {
		outcome = ProbeCompleted
		_, err = r.Store().Resolve(wctx, rec.ExecutionID, store.Resolution{
			Result: store.Result{ExecutionID: rec.ExecutionID, Status: store.StatusCompleted, Data: ans.Data, FinishedAt: r.now()},
			By:     store.ResolvedByProbe,
		})
	} else {
		_, err = r.Store().Release(wctx, rec.ExecutionID, false)
	}
	var se *store.StateError
	switch {
	case errors.As(err, &se), errors.Is(err, store.ErrNotFound):
		r.probed(rec, ProbeSettled)
		return nil
	case err != nil:
		return fmt.Errorf("recording the probe's answer: %w", err)
	}
	r.probed(rec, outcome)
	action := ActionResolve
	if !ans.Found {
		action = ActionRelease
	}
	r.audit(ctx, Decision{Action: action, Actor: store.ResolvedByProbe, Target: rec.ExecutionID, Transport: TransportProbe, Outcome: "ok"})
	return nil
}

// probed tells the observers of a probe's outcome.
func (r *Runtime) probed(rec store.Record, outcome string) {
	if po, ok := r.obs.(ProbeObserver); ok {
		po.Probed(rec.Tool, outcome)
	}
}
