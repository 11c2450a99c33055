package engine_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// TestReadOnlyToolIsNotRecorded: a read-only tool's calls, request_id or
// not, run directly: nothing is reserved or recorded (the store holds no
// entry), the same request_id runs the tool again, and the answer says
// Passthrough.
func TestReadOnlyToolIsNotRecorded(t *testing.T) {
	app := newApp(t)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "catalogue", Func: c.fn, Effects: engine.EffectsReadOnly, DedupeWindow: time.Minute})
	for i, rid := range []string{"r1", "r1", ""} {
		resp := call(t, app, engine.Request{Tool: "catalogue", RequestID: rid, SessionID: "s"})
		mustStatus(t, resp.Record, store.StatusCompleted)
		if !resp.Passthrough || resp.Replayed || resp.Record.Key.RequestID != rid || resp.Record.Seq != 0 {
			t.Fatalf("call %d: passthrough %v, replayed %v, request_id %q, seq %d", i, resp.Passthrough, resp.Replayed, resp.Record.Key.RequestID, resp.Record.Seq)
		}
	}
	if n := c.runs.Load(); n != 3 {
		t.Fatalf("the read-only tool ran %d times, want 3", n)
	}
	st, err := app.Store().Stats(t.Context())
	if err != nil || st.Entries != 0 {
		t.Fatalf("Stats = %+v, %v: want nothing recorded", st, err)
	}
	// A tool of the default effects records the same call.
	mustAdd(t, app, engine.ToolSpec{Name: "order", Func: c.fn})
	if resp := call(t, app, engine.Request{Tool: "order", RequestID: "r1"}); resp.Passthrough {
		t.Fatal("a once tool's call answered as passthrough")
	}
	if st, _ := app.Store().Stats(t.Context()); st.Entries != 1 {
		t.Fatalf("a once tool's call: %d entries, want 1", st.Entries)
	}
}

// TestEffectsValidated: effects must be one of the three, and
// RetryUncertain needs idempotent.
func TestEffectsValidated(t *testing.T) {
	app := newApp(t)
	var c counter
	for _, spec := range []engine.ToolSpec{
		{Name: "bad", Func: c.fn, Effects: "sometimes"},
		{Name: "once", Func: c.fn, RetryUncertain: true},
		{Name: "ro", Func: c.fn, Effects: engine.EffectsReadOnly, RetryUncertain: true},
	} {
		if err := app.AddTool(spec); err == nil {
			t.Errorf("AddTool(%+v) accepted", spec)
		}
	}
	mustAdd(t, app, engine.ToolSpec{Name: "plain", Func: c.fn})
	mustAdd(t, app, engine.ToolSpec{Name: "idem", Func: c.fn, Effects: engine.EffectsIdempotent, RetryUncertain: true})
	for _, info := range app.Tools() {
		want := map[string]engine.Effects{"plain": engine.EffectsOnce, "idem": engine.EffectsIdempotent}[info.Name]
		if info.Effects != want || info.RetryUncertain != (info.Name == "idem") {
			t.Errorf("%s: effects %q, retry_uncertain %v", info.Name, info.Effects, info.RetryUncertain)
		}
	}
}

// TestRetryUncertainRunsAgain: an idempotent tool with RetryUncertain
// whose execution timed out is run again by the retry of the same
// identity, under a new execution and a larger fencing token, and that
// outcome is recorded and replayed; without RetryUncertain the timeout is
// replayed and the tool does not run again.
func TestRetryUncertainRunsAgain(t *testing.T) {
	for _, retry := range []bool{true, false} {
		app := newApp(t)
		var runs atomic.Int64
		var tokens [2]atomic.Uint64
		slowFirst := func(ctx context.Context, call engine.Call) (any, error) {
			n := runs.Add(1)
			if n <= 2 {
				tokens[n-1].Store(call.FencingToken)
			}
			if n == 1 {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return map[string]any{"ok": true}, nil
		}
		mustAdd(t, app, engine.ToolSpec{Name: "put", Func: slowFirst, Timeout: 50 * time.Millisecond,
			Effects: engine.EffectsIdempotent, RetryUncertain: retry})
		req := engine.Request{Tool: "put", RequestID: "r1", Arguments: json.RawMessage(`{"k":"v"}`)}
		first := call(t, app, req)
		mustStatus(t, first.Record, store.StatusTimedOut)

		again := call(t, app, req)
		if !retry {
			if !again.Replayed || again.Record.ExecutionID != first.Record.ExecutionID || runs.Load() != 1 {
				t.Fatalf("without retry_uncertain: replayed %v, runs %d", again.Replayed, runs.Load())
			}
			continue
		}
		mustStatus(t, again.Record, store.StatusCompleted)
		if again.Replayed || again.Record.ExecutionID == first.Record.ExecutionID || runs.Load() != 2 {
			t.Fatalf("the retry: replayed %v, execution %s (first %s), runs %d", again.Replayed, again.Record.ExecutionID, first.Record.ExecutionID, runs.Load())
		}
		if t0, t1 := tokens[0].Load(), tokens[1].Load(); t1 <= t0 {
			t.Fatalf("fencing tokens %d then %d: the retry's is not larger", t0, t1)
		}
		third := call(t, app, req)
		if !third.Replayed || third.Record.ExecutionID != again.Record.ExecutionID || runs.Load() != 2 {
			t.Fatalf("after the retry: replayed %v, runs %d", third.Replayed, runs.Load())
		}
		if _, err := app.Store().Get(t.Context(), first.Record.ExecutionID); err == nil {
			t.Fatal("the timed-out execution's record is still there")
		}
	}
}

// TestEffectsOptions: the library's options set Effects and
// RetryUncertain.
func TestEffectsOptions(t *testing.T) {
	app := newApp(t)
	var c counter
	app.Tool("ro", c.fn, engine.WithEffects(engine.EffectsReadOnly))
	app.Tool("idem", c.fn, engine.WithEffects(engine.EffectsIdempotent), engine.RetryUncertain())
	for _, info := range app.Tools() {
		want := map[string]engine.Effects{"ro": engine.EffectsReadOnly, "idem": engine.EffectsIdempotent}[info.Name]
		if info.Effects != want || info.RetryUncertain != (info.Name == "idem") {
			t.Errorf("%s: effects %q, retry_uncertain %v", info.Name, info.Effects, info.RetryUncertain)
		}
	}
}
