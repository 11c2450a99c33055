package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

func TestCallReplaysFinishedResult(t *testing.T) {
	app := newApp(t)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})
	req := engine.Request{Tool: "count", Arguments: json.RawMessage(`{"a":1}`), RequestID: "r1", SessionID: "s"}
	first := call(t, app, req)
	mustStatus(t, first.Record, store.StatusCompleted)
	if first.Replayed {
		t.Fatal("first call reported as a replay")
	}
	// Same call, spelled differently: still the same call.
	req.Arguments = json.RawMessage(` { "a" : 1.0 } `)
	second := call(t, app, req)
	if !second.Replayed || second.Record.ExecutionID != first.Record.ExecutionID ||
		string(second.Record.Data) != string(first.Record.Data) || !second.Record.FinishedAt.Equal(first.Record.FinishedAt) {
		t.Fatalf("retry = %+v, want a replay of %+v", second, first)
	}
	if n := c.runs.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1", n)
	}
}

func TestCallConflictOnDifferentArguments(t *testing.T) {
	app := newApp(t)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})
	first := call(t, app, engine.Request{Tool: "count", Arguments: json.RawMessage(`{"a":1}`), RequestID: "r1"})
	for _, req := range []engine.Request{
		{Tool: "count", Arguments: json.RawMessage(`{"a":2}`), RequestID: "r1"},
		{Tool: "count", Arguments: json.RawMessage(`{"a":1}`), Metadata: json.RawMessage(`{"m":1}`), RequestID: "r1"},
	} {
		_, err := app.Call(t.Context(), alice, req)
		var ce *store.ConflictError
		if !errors.As(err, &ce) || ce.Record.ExecutionID != first.Record.ExecutionID {
			t.Fatalf("err = %v, want a conflict naming %s", err, first.Record.ExecutionID)
		}
	}
	if n := c.runs.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1", n)
	}
	// The timeout is not part of the fingerprint.
	resp := call(t, app, engine.Request{Tool: "count", Arguments: json.RawMessage(`{"a":1}`), RequestID: "r1", Timeout: time.Second})
	if !resp.Replayed {
		t.Fatal("a retry with another timeout was not replayed")
	}
}

func TestCallUncertainWhileRunning(t *testing.T) {
	app := newApp(t)
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "gate", Func: g.fn})
	req := engine.Request{Tool: "gate", RequestID: "r1"}
	done := make(chan engine.Response, 1)
	go func() {
		resp, _ := app.Call(context.Background(), alice, req)
		done <- resp
	}()
	id := <-g.started

	_, err := app.Call(t.Context(), alice, req)
	var ue *store.UncertainError
	if !errors.As(err, &ue) || ue.Record.ExecutionID != id || ue.Record.Status != store.StatusRunning {
		t.Fatalf("retry while running: err = %v, want uncertain(running, %s)", err, id)
	}
	close(g.release)
	first := <-done
	mustStatus(t, first.Record, store.StatusCompleted)
	if again := call(t, app, req); !again.Replayed || again.Record.ExecutionID != id {
		t.Fatalf("retry after finish = %+v", again)
	}
	if n := g.runs.Load(); n != 1 {
		t.Fatalf("tool ran %d times, want 1", n)
	}
}

func TestConcurrentDuplicatesRunOnce(t *testing.T) {
	app := newApp(t)
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "gate", Func: g.fn})
	const n = 200
	var (
		wg                     sync.WaitGroup
		mu                     sync.Mutex
		completed, uncertain   int
		others                 []error
		start                  = make(chan struct{})
		req                    = engine.Request{Tool: "gate", RequestID: "dup"}
		releaseAfterAllAnswers = make(chan struct{})
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := app.Call(context.Background(), alice, req)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && resp.Record.Status == store.StatusCompleted:
				completed++
			case errors.Is(err, store.ErrUncertain):
				uncertain++
				if uncertain == n-1 {
					close(releaseAfterAllAnswers)
				}
			default:
				others = append(others, fmt.Errorf("resp %+v, err %w", resp, err))
			}
		}()
	}
	close(start)
	<-g.started
	<-releaseAfterAllAnswers
	close(g.release)
	wg.Wait()
	if completed != 1 || uncertain != n-1 || len(others) > 0 {
		t.Fatalf("completed %d, uncertain %d, other %v; want 1 and %d", completed, uncertain, others, n-1)
	}
	if runs := g.runs.Load(); runs != 1 {
		t.Fatalf("tool ran %d times, want 1", runs)
	}
}

func TestTimeoutIsRecordedAndReplayed(t *testing.T) {
	app := newApp(t)
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "slow", Func: g.fn, Timeout: 100 * time.Millisecond})
	// A tool that ignores its context is abandoned at the timeout too.
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	mustAdd(t, app, engine.ToolSpec{Name: "stuck", Timeout: 100 * time.Millisecond,
		Func: func(context.Context, engine.Call) (any, error) { <-stuck; return "late", nil }})

	for _, tool := range []string{"slow", "stuck"} {
		req := engine.Request{Tool: tool, RequestID: "t-" + tool}
		first := call(t, app, req)
		mustStatus(t, first.Record, store.StatusTimedOut)
		if code, msg := errorCode(t, first.Record); code != "TIMEOUT" || !strings.Contains(msg, "100ms") {
			t.Fatalf("%s: error = %s %q, want TIMEOUT within 100ms", tool, code, msg)
		}
		again := call(t, app, req)
		if !again.Replayed || again.Record.Status != store.StatusTimedOut || again.Record.ExecutionID != first.Record.ExecutionID {
			t.Fatalf("%s: retry after timeout = %+v, want the timed_out replay", tool, again)
		}
	}
	if n := g.runs.Load(); n != 1 {
		t.Fatalf("slow tool ran %d times, want 1", n)
	}
}

func TestCallTimeoutLowersButNeverRaises(t *testing.T) {
	app := newApp(t)
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "slow", Func: g.fn, Timeout: 150 * time.Millisecond})
	cases := []struct {
		timeout time.Duration
		want    string
	}{
		{time.Hour, "150ms"},
		{20 * time.Millisecond, "20ms"},
	}
	for i, c := range cases {
		resp := call(t, app, engine.Request{Tool: "slow", RequestID: fmt.Sprint("lower-", i), Timeout: c.timeout})
		mustStatus(t, resp.Record, store.StatusTimedOut)
		if _, msg := errorCode(t, resp.Record); !strings.Contains(msg, c.want) {
			t.Fatalf("timeout %s: message %q, want it to say %s", c.timeout, msg, c.want)
		}
	}
	_, err := app.Call(t.Context(), alice, engine.Request{Tool: "slow", Timeout: -time.Second})
	wantField(t, err, "timeout_ms")
}

func TestCallerGoingAwayDoesNotStopTheTool(t *testing.T) {
	app := newApp(t)
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "gate", Func: g.fn})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := app.Call(ctx, alice, engine.Request{Tool: "gate", RequestID: "gone"})
		errc <- err
	}()
	<-g.started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Call after the caller left: %v, want context.Canceled", err)
	}
	select {
	case err := <-g.sawCtx:
		t.Fatalf("the tool's context ended with the caller's: %v", err)
	default:
	}
	close(g.release)
	key := store.Key{Principal: "alice", RequestID: "gone"}
	testutil.Until(t, 10*time.Second, "the outcome to be recorded", func() bool {
		rec, err := app.Store().Lookup(context.Background(), key)
		return err == nil && rec.Status == store.StatusCompleted
	})
	if resp := call(t, app, engine.Request{Tool: "gate", RequestID: "gone"}); !resp.Replayed || string(resp.Record.Data) != `"released"` {
		t.Fatalf("retry = %+v, want the recorded result", resp)
	}
}

func TestPanicIsRecordedAsFailed(t *testing.T) {
	app := newApp(t)
	mustAdd(t, app, engine.ToolSpec{Name: "panics", Func: func(context.Context, engine.Call) (any, error) { panic("kaboom") }})
	resp := call(t, app, engine.Request{Tool: "panics", RequestID: "p1"})
	mustStatus(t, resp.Record, store.StatusFailed)
	if code, msg := errorCode(t, resp.Record); code != "TOOL_ERROR" || !strings.Contains(msg, "kaboom") {
		t.Fatalf("error = %s %q", code, msg)
	}
	if again := call(t, app, engine.Request{Tool: "panics", RequestID: "p1"}); !again.Replayed {
		t.Fatal("a panic's result was not replayed")
	}
}

func TestToolErrorsKeepTheirCode(t *testing.T) {
	app := newApp(t)
	mustAdd(t, app, engine.ToolSpec{Name: "oos", Func: func(context.Context, engine.Call) (any, error) {
		return nil, fmt.Errorf("placing the order: %w", &engine.ToolError{Code: "OUT_OF_STOCK", Message: "none left", Details: map[string]any{"sku": "KB-01"}})
	}})
	mustAdd(t, app, engine.ToolSpec{Name: "plain", Func: func(context.Context, engine.Call) (any, error) {
		return nil, errors.New("disk full")
	}})
	rec := call(t, app, engine.Request{Tool: "oos", RequestID: "o1"}).Record
	mustStatus(t, rec, store.StatusFailed)
	var body map[string]any
	if err := json.Unmarshal(rec.Error, &body); err != nil || body["code"] != "OUT_OF_STOCK" || body["sku"] != "KB-01" || body["message"] != "none left" {
		t.Fatalf("error = %s", rec.Error)
	}
	if code, msg := errorCode(t, call(t, app, engine.Request{Tool: "plain", RequestID: "p1"}).Record); code != "TOOL_ERROR" || msg != "disk full" {
		t.Fatalf("plain error = %s %q", code, msg)
	}
}

func TestOversizedResultIsRefusedWhole(t *testing.T) {
	app := newApp(t, engine.WithMaxResultBytes(100))
	mustAdd(t, app, engine.ToolSpec{Name: "big", Func: func(context.Context, engine.Call) (any, error) {
		return strings.Repeat("x", 200), nil
	}})
	mustAdd(t, app, engine.ToolSpec{Name: "bad", Func: func(context.Context, engine.Call) (any, error) {
		return json.RawMessage(`{"oops"`), nil
	}})
	rec := call(t, app, engine.Request{Tool: "big", RequestID: "b1"}).Record
	mustStatus(t, rec, store.StatusFailed)
	if code, _ := errorCode(t, rec); code != "RESULT_TOO_LARGE" || len(rec.Data) != 0 {
		t.Fatalf("oversized result recorded as %s with %d bytes of data", code, len(rec.Data))
	}
	rec = call(t, app, engine.Request{Tool: "bad", RequestID: "b2"}).Record
	mustStatus(t, rec, store.StatusFailed)
}

func TestArgumentsAreValidatedBeforeReserving(t *testing.T) {
	app := newApp(t)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "order", Func: c.fn, RequireRequestID: true,
		InputSchema: json.RawMessage(`{"type":"object","required":["sku"],"properties":{"sku":{"type":"string"},"qty":{"type":"integer"}}}`)})
	cases := []struct {
		req   engine.Request
		field string
	}{
		{engine.Request{Tool: "order", RequestID: "a", Arguments: json.RawMessage(`{}`)}, "arguments.sku"},
		{engine.Request{Tool: "order", RequestID: "a", Arguments: json.RawMessage(`{"sku":1}`)}, "arguments.sku"},
		{engine.Request{Tool: "order", RequestID: "a", Arguments: json.RawMessage(`{"sku":"x","qty":1.5}`)}, "arguments.qty"},
		{engine.Request{Tool: "order", RequestID: "a", Arguments: json.RawMessage(`[1]`)}, "arguments"},
		{engine.Request{Tool: "order", RequestID: "a", Arguments: json.RawMessage(`{"sku":"x"}`), Metadata: json.RawMessage(`"m"`)}, "metadata"},
		{engine.Request{Tool: "order", Arguments: json.RawMessage(`{"sku":"x"}`)}, "request_id"},
		{engine.Request{Tool: "order", RequestID: strings.Repeat("r", 256), Arguments: json.RawMessage(`{"sku":"x"}`)}, "request_id"},
		{engine.Request{Tool: "order", RequestID: "bad\x01id", Arguments: json.RawMessage(`{"sku":"x"}`)}, "request_id"},
		{engine.Request{Tool: "order", RequestID: "a", SessionID: "has space", Arguments: json.RawMessage(`{"sku":"x"}`)}, "session_id"},
		{engine.Request{RequestID: "a"}, "tool"},
	}
	for _, tc := range cases {
		_, err := app.Call(t.Context(), alice, tc.req)
		wantField(t, err, tc.field)
	}
	_, err := app.Call(t.Context(), alice, engine.Request{Tool: "nope", RequestID: "a"})
	wantErrIs(t, err, engine.ErrUnknownTool)
	if store.CodeOf(err) != "UNKNOWN_TOOL" {
		t.Fatalf("code = %q", store.CodeOf(err))
	}
	if st, _ := app.Store().Stats(t.Context()); st.Entries != 0 || c.runs.Load() != 0 {
		t.Fatalf("invalid calls reserved %d records and ran the tool %d times", st.Entries, c.runs.Load())
	}
	// The good call still works.
	mustStatus(t, call(t, app, engine.Request{Tool: "order", RequestID: "a", Arguments: json.RawMessage(`{"sku":"x"}`)}).Record, store.StatusCompleted)
}

func TestCallWithoutRequestIDIsNotRecorded(t *testing.T) {
	app := newApp(t)
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})
	a := call(t, app, engine.Request{Tool: "count"})
	b := call(t, app, engine.Request{Tool: "count"})
	mustStatus(t, a.Record, store.StatusCompleted)
	if a.Record.ExecutionID == b.Record.ExecutionID || !strings.HasPrefix(a.Record.ExecutionID, "exec_") || c.runs.Load() != 2 {
		t.Fatalf("unrecorded calls: %s and %s, %d runs", a.Record.ExecutionID, b.Record.ExecutionID, c.runs.Load())
	}
	if _, err := app.Execution(t.Context(), alice, a.Record.ExecutionID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Execution of an unrecorded call: %v, want ErrNotFound", err)
	}
	if st, _ := app.Store().Stats(t.Context()); st.Entries != 0 {
		t.Fatalf("unrecorded calls left %d records", st.Entries)
	}
}

func TestFullStoreFailsClosed(t *testing.T) {
	app := newApp(t)
	app.IdempotencyStore(store.NewMemory(1))
	var c counter
	mustAdd(t, app, engine.ToolSpec{Name: "count", Func: c.fn})
	call(t, app, engine.Request{Tool: "count", RequestID: "r1"})
	_, err := app.Call(t.Context(), alice, engine.Request{Tool: "count", RequestID: "r2"})
	wantErrIs(t, err, store.ErrCapacity)
	if store.CodeOf(err) != "IDEMPOTENCY_CAPACITY" || c.runs.Load() != 1 {
		t.Fatalf("code %q, runs %d: the tool must not run when the store is full", store.CodeOf(err), c.runs.Load())
	}
	if resp := call(t, app, engine.Request{Tool: "count", RequestID: "r1"}); !resp.Replayed {
		t.Fatal("a full store stopped replaying")
	}
}

func TestExecutionIDs(t *testing.T) {
	seen := make(map[string]bool)
	now := time.Now()
	for range 1000 {
		id := engine.NewExecutionID(now)
		if len(id) != len("exec_")+36 || !strings.HasPrefix(id, "exec_") || seen[id] {
			t.Fatalf("bad or repeated execution id %q", id)
		}
		seen[id] = true
	}
	if a, b := engine.NewExecutionID(now), engine.NewExecutionID(now.Add(time.Second)); a[:15] >= b[:15] {
		t.Fatalf("ids do not sort by time: %s then %s", a, b)
	}
}

func TestSetupErrorsAreReported(t *testing.T) {
	app := newApp(t)
	fn := func(context.Context, engine.Call) (any, error) { return nil, nil }
	app.Tool("ok", fn, engine.Description("fine"), engine.Timeout(time.Second))
	app.Tool("ok", fn)
	app.Tool("bad schema", fn)
	app.Tool("schema", fn, engine.InputSchema(json.RawMessage(`{"type":12}`)))
	app.Tool("nil", nil)
	err := app.Err()
	for _, want := range []string{"registered twice", "bad schema", "input_schema", "no function"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Err() = %v, want it to mention %q", err, want)
		}
	}
	if err := app.Start(t.Context()); err == nil {
		t.Fatal("Start succeeded despite setup errors")
	}
	if tools := app.Tools(); len(tools) != 1 || tools[0].Name != "ok" || tools[0].Timeout != time.Second {
		t.Fatalf("Tools() = %+v", tools)
	}
}

// TestMaxRunningFailsClosed checks the bound on tools running at once: a
// call over it answers UNAVAILABLE, reserves nothing and runs nothing, and
// the same call succeeds once a slot is free.
func TestMaxRunningFailsClosed(t *testing.T) {
	app := newApp(t, engine.WithMaxRunning(1))
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "gated", Func: g.fn})
	caller := engine.Caller{Principal: "p"}
	first := make(chan error, 1)
	go func() {
		_, err := app.Call(context.Background(), caller, engine.Request{Tool: "gated", RequestID: "first"})
		first <- err
	}()
	<-g.started
	_, err := app.Call(context.Background(), caller, engine.Request{Tool: "gated", RequestID: "second"})
	if store.CodeOf(err) != "UNAVAILABLE" || !strings.Contains(err.Error(), "did not run") {
		t.Fatalf("a second tool over the limit: %v, want UNAVAILABLE saying the tool did not run", err)
	}
	if _, err := app.Call(context.Background(), caller, engine.Request{Tool: "gated"}); store.CodeOf(err) != "UNAVAILABLE" {
		t.Fatalf("an unrecorded call over the limit: %v, want UNAVAILABLE", err)
	}
	if _, err := app.Store().Lookup(context.Background(), store.Key{Principal: "p", RequestID: "second"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused call left a record: %v", err)
	}
	close(g.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	resp := call(t, app, engine.Request{Tool: "gated", RequestID: "second"})
	if resp.Record.Status != store.StatusCompleted || resp.Replayed {
		t.Fatalf("the retry once a slot is free: %+v, want a new completed execution", resp)
	}
}

// TestToolOptions checks that a tool registered with Tool takes its
// options: description, schema and timeout as Tools lists them, and a
// required request_id.
func TestToolOptions(t *testing.T) {
	app := newApp(t)
	var c counter
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	app.Tool("strict", c.fn, engine.Description("needs an id"), engine.InputSchema(schema),
		engine.Timeout(2*time.Second), engine.RequireRequestID())
	if err := app.Err(); err != nil {
		t.Fatal(err)
	}
	tools := app.Tools()
	if len(tools) != 1 || tools[0].Description != "needs an id" || string(tools[0].InputSchema) != string(schema) || tools[0].Timeout != 2*time.Second {
		t.Fatalf("Tools() = %+v", tools)
	}
	_, err := app.Call(t.Context(), alice, engine.Request{Tool: "strict"})
	wantField(t, err, "request_id")
	_, err = app.Call(t.Context(), alice, engine.Request{Tool: "strict", RequestID: "r1", Arguments: json.RawMessage(`{"n":"x"}`)})
	wantField(t, err, "arguments.n")
	mustStatus(t, call(t, app, engine.Request{Tool: "strict", RequestID: "r1", Arguments: json.RawMessage(`{"n":1}`)}).Record, store.StatusCompleted)
}
