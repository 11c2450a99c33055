package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/carmyhq/carmy/internal/tracing"
	"github.com/carmyhq/carmy/store"
)

// execute runs a reserved call's tool and records its outcome. The tool
// runs in its own goroutine under its own context; ctx only bounds how long
// the caller waits.
func (r *Runtime) execute(ctx context.Context, p *pending, rn *run, rec store.Record) (Response, error) {
	answer := make(chan outcome, 1)
	go func() {
		defer r.runs.finish(rec.ExecutionID)
		res, fate := r.invoke(rn, p, rec)
		if errors.Is(fate, ErrNotSent) {
			r.releaseNotSent(rec, fate, answer)
			return
		}
		// The principal's byte quota applies to the outcome too; one that
		// does not fit is recorded as a bounded failure by the store.
		res.ByteQuota = p.caller.MaxBytes
		// The result is in flight until recorded: it counts against
		// MaxInflightBytes, but is never refused for it.
		r.runs.hold(rec.ExecutionID, int64(len(res.Data)+len(res.Error)))
		r.record(p.trace, rec, res, p.timeout, answer)
	}()
	select {
	case o := <-answer:
		return Response{Record: o.rec}, o.err
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
}

// outcome is what the caller of execute is told.
type outcome struct {
	rec store.Record
	err error
}

// invoke runs the tool and turns what it did into a Result. It returns
// when the tool returns or its context ends, whichever is first; a tool
// that ignores its context is abandoned (its result discarded).
//
// fate is the tool's error when it says its request never left
// (ErrNotSent: res is then a failure to answer a call without identity
// with, and a reservation must be released instead) or that its answer
// was lost (ErrAnswerLost: res is interrupted).
func (r *Runtime) invoke(rn *run, p *pending, rec store.Record) (res store.Result, fate error) {
	ctx, stop := rn.withTimeout(p.timeout)
	defer stop()
	ctx, span := tracing.StartUnder(ctx, p.trace, tracing.SpanTool)
	ctx = withProgress(ctx, p.req.Progress)
	ctx, ended := startSent(ctx, p)
	start := time.Now()
	type ret struct {
		data json.RawMessage
		err  error
	}
	done := make(chan ret, 1)
	go func() {
		data, err := r.callTool(ctx, p, rec)
		done <- ret{data, err}
	}()
	var got ret
	select {
	case got = <-done:
	case <-ctx.Done():
		got = ret{err: ctx.Err()}
	}
	if ended != nil {
		ended(got.err)
	}
	res = store.Result{ExecutionID: rec.ExecutionID, FinishedAt: r.now()}
	switch cause := context.Cause(ctx); {
	case got.err == nil:
		res.Status, res.Data = store.StatusCompleted, got.data
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.Status = store.StatusTimedOut
		res.Error = errorBody(&ToolError{Code: CodeTimeout, Message: fmt.Sprintf("the tool did not finish within %s", p.timeout)})
	case ctx.Err() != nil && (errors.Is(cause, errCancelled) || errors.Is(cause, errShutdown)):
		res.Status = store.StatusCancelled
		res.Error = errorBody(&ToolError{Code: CodeCancelled, Message: cause.Error()})
	case errors.Is(got.err, ErrNotSent):
		fate = got.err
		res.Status = store.StatusFailed
		res.Error = errorBody(&ToolError{Code: CodeUpstreamUnreachable, Message: notSentAnswer(p.tool.Name, got.err).Error()})
		r.logFate(p, rec, "the tool's request was never sent; nothing is recorded", got.err)
	case errors.Is(got.err, ErrAnswerLost):
		fate = got.err
		res.Status, res.FinishedAt = store.StatusInterrupted, time.Time{}
		r.logFate(p, rec, "the tool's request was sent but its answer was lost; the execution is interrupted until reconciled", got.err)
	default:
		res.Status = store.StatusFailed
		res.Error = errorBody(toolErrorOf(got.err))
	}
	r.obs.ToolFinished(p.tool.Name, res.Status, time.Since(start))
	tracing.End(span, tracing.AttrStatus, string(res.Status), got.err)
	return res, fate
}

// logFate logs a tool's ErrNotSent or ErrAnswerLost.
func (r *Runtime) logFate(p *pending, rec store.Record, msg string, err error) {
	r.cfg.Logger.Warn(msg, slog.String("tool", p.tool.Name), slog.String("execution_id", rec.ExecutionID),
		slog.String("reason", fateReason(err)))
}

// callTool calls the tool function, recovering a panic, and encodes its
// value within MaxResultBytes.
func (r *Runtime) callTool(ctx context.Context, p *pending, rec store.Record) (data json.RawMessage, err error) {
	defer func() {
		if v := recover(); v != nil {
			r.cfg.Logger.Error("tool panicked", slog.String("tool", p.tool.Name),
				slog.String("execution_id", rec.ExecutionID), slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
			data, err = nil, &ToolError{Code: CodeToolError, Message: fmt.Sprintf("the tool panicked: %v", v)}
		}
	}()
	v, err := p.tool.Func(ctx, callOf(p, rec))
	if err != nil {
		return nil, err
	}
	data, err = encodeResult(v)
	if err != nil {
		return nil, &ToolError{Code: CodeToolError, Message: err.Error()}
	}
	if len(data) > r.cfg.MaxResultBytes {
		return nil, &ToolError{Code: CodeResultTooLarge,
			Message: fmt.Sprintf("the result is %d bytes, over the limit of %d", len(data), r.cfg.MaxResultBytes)}
	}
	return data, nil
}

// encodeResult encodes a tool's value as compact JSON.
func encodeResult(v any) (json.RawMessage, error) {
	switch raw := v.(type) {
	case json.RawMessage:
		if !json.Valid(raw) {
			return nil, errors.New("the tool returned invalid JSON")
		}
		return compact(raw)
	case []byte:
		return json.Marshal(string(raw))
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("the tool's result cannot be encoded as JSON: %w", err)
	}
	return data, nil
}

func compact(raw json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// errorBody encodes a ToolError as the recorded error object.
func errorBody(te *ToolError) json.RawMessage {
	m := make(map[string]any, len(te.Details)+2)
	for k, v := range te.Details {
		m[k] = v
	}
	m["code"], m["message"] = te.Code, te.Message
	b, err := json.Marshal(m)
	if err != nil {
		b, _ = json.Marshal(store.ErrorBody{Code: te.Code, Message: te.Message})
	}
	return b
}

// record stores res for rec's identity and tells the caller through answer.
// A store that cannot take the write is retried in the background until
// the outcome is recorded or the record no longer belongs to this
// execution. The caller waits for it up to StoreTimeout plus the tool's
// timeout (docs/operations.md#overload: a tool that ran is not answered "not recorded" for
// load alone; a slow commit under load gets that long), then is told
// UNAVAILABLE meanwhile (an *UnrecordedError). Its span is a child of
// parent, the call's (tracing.SpanComplete).
func (r *Runtime) record(parent *tracing.Span, rec store.Record, res store.Result, toolTimeout time.Duration, answer chan<- outcome) {
	base, span := tracing.StartUnder(context.Background(), parent, tracing.SpanComplete)
	var err error
	defer func() { tracing.End(span, "", "", err) }()
	deadline := time.Now().Add(r.cfg.StoreTimeout + toolTimeout)
	told := false
	// tell answers the caller once. The final answers (every path that
	// returns) leave the running set first, so a caller that has its
	// answer finds the node's slot free for its next call.
	tell := func(o outcome) {
		r.runs.finish(rec.ExecutionID)
		if !told {
			told = true
			answer <- o
		}
	}
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(base, r.cfg.StoreTimeout)
		start := time.Now()
		var done store.Record
		done, err = r.Store().Complete(ctx, rec.Key, rec.Fingerprint, res)
		cancel()
		result := "ok"
		if err != nil {
			result = "error"
		}
		r.obs.StoreWrite(StoreComplete, result, time.Since(start))
		var se *store.StateError
		stateErr := errors.As(err, &se)
		switch {
		case err == nil && done.Status == store.StatusInterrupted:
			// Its answer was lost (ErrAnswerLost): uncertain, as every
			// retry will be told until it is reconciled.
			tell(outcome{err: &store.UncertainError{Record: done}})
			return
		case err == nil:
			tell(outcome{rec: done})
			return
		case stateErr && se.Record.ExecutionID == rec.ExecutionID:
			// Cancelled or resolved meanwhile: answer with the record as
			// it stands; the tool's result is discarded.
			tell(outcome{rec: se.Record})
			return
		case stateErr, errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
			// Released meanwhile: the identity is vacant again, or already
			// another execution's (with these arguments, a state error
			// naming it; with others, a conflict). This outcome belongs to
			// nobody, and the other execution's record is not this
			// caller's answer.
			tell(outcome{err: &releasedError{rec}})
			return
		case errors.Is(err, store.ErrInvalid):
			r.cfg.Logger.Error("outcome not recorded", slog.String("execution_id", rec.ExecutionID), slog.Any("err", err))
			tell(outcome{err: fmt.Errorf("complete: %w", err)})
			return
		}
		if !told && time.Now().After(deadline) {
			// Not final: the outcome stays in flight (and counted) while
			// it is retried.
			told = true
			answer <- outcome{err: &UnrecordedError{ExecutionID: rec.ExecutionID, Cause: err}}
			r.runs.answered(rec.ExecutionID)
		}
		if r.isClosing() && attempt > 0 {
			r.cfg.Logger.Warn("shutting down with an unrecorded outcome; the execution will read as interrupted",
				slog.String("execution_id", rec.ExecutionID), slog.Any("err", err))
			tell(outcome{err: fmt.Errorf("%w: outcome not recorded: %w", store.ErrUnavailable, err)})
			return
		}
		time.Sleep(backoff(attempt))
	}
}

// backoff returns the pause before retry attempt+1: 50 ms doubling to 2 s.
func backoff(attempt int) time.Duration {
	d := 50 * time.Millisecond << min(attempt, 6)
	return min(d, 2*time.Second)
}

// releaseNotSent releases the reservation of rec, whose tool says its
// request never left this node (ErrNotSent), and tells the caller
// UNAVAILABLE through answer: nothing is recorded, and the retry runs the
// tool. A record cancelled or resolved meanwhile is the answer as it
// stands. When the store cannot take the release now, it is retried in
// the background (the identity reads as running until then).
func (r *Runtime) releaseNotSent(rec store.Record, fate error, answer chan<- outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.StoreTimeout)
	_, err := r.Store().Release(ctx, rec.ExecutionID, true)
	cancel()
	var se *store.StateError
	switch {
	case err == nil:
		r.cfg.Logger.Info("released a reservation whose request was never sent",
			slog.String("execution_id", rec.ExecutionID), slog.String("key", rec.Key.String()))
	case errors.As(err, &se) && se.Record.ExecutionID == rec.ExecutionID && se.Record.Status.Finished():
		r.runs.finish(rec.ExecutionID)
		answer <- outcome{rec: se.Record}
		return
	case errors.Is(err, store.ErrNotFound), errors.As(err, &se):
		// Released already, or the identity is another execution's.
	default:
		r.releaseInBackground(rec.Key, rec.ExecutionID)
	}
	r.runs.finish(rec.ExecutionID) // free before the caller hears, as record does
	answer <- outcome{err: notSentAnswer(rec.Tool, fate)}
}
