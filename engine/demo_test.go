package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

// demoApp returns a quiet runtime with the demo tools.
func demoApp(t *testing.T) *Runtime {
	t.Helper()
	app := quietApp(t)
	if err := app.AddDemoTools(); err != nil {
		t.Fatalf("AddDemoTools: %v", err)
	}
	return app
}

// mustCall calls a tool and fails the test on an error.
func mustCall(t *testing.T, app *Runtime, req Request) Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := app.Call(ctx, Caller{Principal: "p"}, req)
	if err != nil {
		t.Fatalf("Call(%s, %s): %v", req.Tool, req.Arguments, err)
	}
	return resp
}

func TestDemoToolsListed(t *testing.T) {
	app := demoApp(t)
	tools := app.Tools()
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
		if tl.Description == "" || !json.Valid(tl.InputSchema) {
			t.Errorf("tool %s: description %q, input_schema %s", tl.Name, tl.Description, tl.InputSchema)
		}
		if tl.Timeout <= 0 {
			t.Errorf("tool %s: timeout %v", tl.Name, tl.Timeout)
		}
	}
	if got, want := strings.Join(names, ","), "create_order,echo,fail,lookup,sleep"; got != want {
		t.Errorf("tools = %s, want %s", got, want)
	}
	if err := app.AddDemoTools(); err == nil {
		t.Error("AddDemoTools twice: no error")
	}
}

func TestDemoEcho(t *testing.T) {
	app := demoApp(t)
	args := json.RawMessage(`{"a": [1, 2.5, "x"], "b": {"c": null}, "d": true}`)
	for _, id := range []string{"", "e1"} {
		resp := mustCall(t, app, Request{Tool: "echo", Arguments: args, RequestID: id})
		if resp.Record.Status != store.StatusCompleted || !sameJSON(t, resp.Record.Data, args) {
			t.Errorf("echo (request_id %q) = %s %s, want completed with the arguments", id, resp.Record.Status, resp.Record.Data)
		}
	}
	resp := mustCall(t, app, Request{Tool: "echo"})
	if string(resp.Record.Data) != `{}` {
		t.Errorf("echo without arguments = %s, want {}", resp.Record.Data)
	}
	// A replay answers the recorded arguments.
	again := mustCall(t, app, Request{Tool: "echo", Arguments: args, RequestID: "e1"})
	if !again.Replayed || !sameJSON(t, again.Record.Data, args) {
		t.Errorf("echo retry = %+v, want a replay", again)
	}
}

func TestDemoCreateOrder(t *testing.T) {
	type order struct {
		OrderID int64  `json:"order_id"`
		SKU     string `json:"sku"`
	}
	orderOf := func(t *testing.T, resp Response) order {
		t.Helper()
		if resp.Record.Status != store.StatusCompleted {
			t.Fatalf("create_order = %s %s, want completed", resp.Record.Status, resp.Record.Error)
		}
		var o order
		if err := json.Unmarshal(resp.Record.Data, &o); err != nil {
			t.Fatalf("create_order data %s: %v", resp.Record.Data, err)
		}
		return o
	}

	app := demoApp(t)
	skus := []string{"KB-01", "MS-02", "KB-01"}
	var ids []int64
	for i, sku := range skus {
		resp := mustCall(t, app, Request{Tool: "create_order", Arguments: json.RawMessage(`{"sku":"` + sku + `"}`), RequestID: "o" + sku + string(rune('0'+i))})
		o := orderOf(t, resp)
		if o.SKU != sku {
			t.Errorf("order %d = %+v, want sku %s", i, o, sku)
		}
		// The order id is the fencing token: unique, growing in commit
		// order (issue 18, finding 5: per-process numbers repeated
		// across restarts and nodes, which looked like duplicates).
		if tok := resp.Record.Seq; uint64(o.OrderID) != tok {
			t.Errorf("order %d id = %d, want its fencing token %d", i, o.OrderID, tok)
		}
		if len(ids) > 0 && o.OrderID <= ids[len(ids)-1] {
			t.Errorf("order ids %v then %d: want them growing", ids, o.OrderID)
		}
		ids = append(ids, o.OrderID)
	}
	// A replay does not create an order.
	replay := mustCall(t, app, Request{Tool: "create_order", Arguments: json.RawMessage(`{"sku":"KB-01"}`), RequestID: "oKB-010"})
	if o := orderOf(t, replay); !replay.Replayed || o.OrderID != ids[0] {
		t.Errorf("replay = %+v (replayed %v), want order %d replayed", o, replay.Replayed, ids[0])
	}
	// A call without request_id runs, with a number no token reaches.
	if o := orderOf(t, mustCall(t, app, Request{Tool: "create_order", Arguments: json.RawMessage(`{"sku":"X"}`)})); o.OrderID < 1<<52 || o.OrderID >= 1<<53 {
		t.Errorf("unrecorded order = %d, want one in [2^52, 2^53)", o.OrderID)
	}

	// The schema requires a non-empty string sku; the tool does not run.
	for _, args := range []string{`{}`, `{"sku":""}`, `{"sku":12}`} {
		_, err := app.Call(t.Context(), Caller{Principal: "p"}, Request{Tool: "create_order", Arguments: json.RawMessage(args), RequestID: "bad"})
		var fe *store.FieldError
		if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "arguments") {
			t.Errorf("create_order %s: err = %v, want INVALID_REQUEST on the arguments", args, err)
		}
	}
	// Nothing was reserved for them: the next order's token follows.
	if o := orderOf(t, mustCall(t, app, Request{Tool: "create_order", Arguments: json.RawMessage(`{"sku":"Z"}`), RequestID: "oZ"})); o.OrderID != ids[len(ids)-1]+1 {
		t.Errorf("order after invalid calls = %d, want %d", o.OrderID, ids[len(ids)-1]+1)
	}
}

func TestDemoSleep(t *testing.T) {
	app := demoApp(t)
	resp := mustCall(t, app, Request{Tool: "sleep", Arguments: json.RawMessage(`{"ms": 5}`), RequestID: "s1"})
	if resp.Record.Status != store.StatusCompleted || !sameJSON(t, resp.Record.Data, []byte(`{"slept_ms":5}`)) {
		t.Errorf("sleep 5 = %s %s, want completed {\"slept_ms\":5}", resp.Record.Status, resp.Record.Data)
	}
	resp = mustCall(t, app, Request{Tool: "sleep", Arguments: json.RawMessage(`{"ms": 0}`)})
	if !sameJSON(t, resp.Record.Data, []byte(`{"slept_ms":0}`)) {
		t.Errorf("sleep 0 = %s", resp.Record.Data)
	}
	for _, args := range []string{`{}`, `{"ms":-1}`, `{"ms":1.5}`, `{"ms":"1"}`} {
		_, err := app.Call(t.Context(), Caller{Principal: "p"}, Request{Tool: "sleep", Arguments: json.RawMessage(args)})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("sleep %s: err = %v, want INVALID_REQUEST", args, err)
		}
	}
}

func TestDemoSleepTimeout(t *testing.T) {
	app := demoApp(t)
	// The tool sleeps a minute unless its timeout_ms stops it.
	resp := mustCall(t, app, Request{Tool: "sleep", Arguments: json.RawMessage(`{"ms": 60000}`), RequestID: "s1", Timeout: 50 * time.Millisecond})
	if resp.Record.Status != store.StatusTimedOut || resp.Record.ErrorCode() != CodeTimeout {
		t.Fatalf("sleep past its timeout = %s %s, want timed_out with TIMEOUT", resp.Record.Status, resp.Record.Error)
	}
	// The timeout is recorded: a retry replays it.
	again := mustCall(t, app, Request{Tool: "sleep", Arguments: json.RawMessage(`{"ms": 60000}`), RequestID: "s1", Timeout: 50 * time.Millisecond})
	if !again.Replayed || again.Record.Status != store.StatusTimedOut || again.Record.ExecutionID != resp.Record.ExecutionID {
		t.Errorf("retry = %+v, want the timed_out replayed", again)
	}
}

func TestDemoSleepCancel(t *testing.T) {
	app := demoApp(t)
	caller := Caller{Principal: "p"}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	type result struct {
		resp Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := app.Call(ctx, caller, Request{Tool: "sleep", Arguments: json.RawMessage(`{"ms": 60000}`), RequestID: "s1"})
		done <- result{resp, err}
	}()

	// Wait for the reservation, then cancel the execution.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var rec store.Record
	for {
		r, err := app.Lookup(ctx, caller, "", "s1")
		if err == nil {
			rec = r
			break
		}
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Lookup: %v", err)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the sleep call was never reserved")
		}
	}
	cancelled, err := app.Cancel(ctx, caller, rec.ExecutionID)
	if err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if cancelled.Status != store.StatusCancelled {
		t.Errorf("Cancel = %s, want cancelled", cancelled.Status)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("the cancelled call returned %v", r.err)
		}
		if r.resp.Record.Status != store.StatusCancelled || r.resp.Record.ErrorCode() != CodeCancelled {
			t.Errorf("the cancelled call answered %s %s, want cancelled", r.resp.Record.Status, r.resp.Record.Error)
		}
	case <-ctx.Done():
		t.Fatal("the sleep tool did not stop when cancelled")
	}
}

func TestDemoFail(t *testing.T) {
	app := demoApp(t)
	resp := mustCall(t, app, Request{Tool: "fail", Arguments: json.RawMessage(`{"message": "card declined"}`), RequestID: "f1"})
	rec := resp.Record
	if rec.Status != store.StatusFailed {
		t.Fatalf("fail = %s, want failed", rec.Status)
	}
	e := recordedError(t, rec)
	if e["code"] != CodeToolError || e["message"] != "card declined" {
		t.Errorf("error = %s, want TOOL_ERROR with the message", rec.Error)
	}
	if len(rec.Data) != 0 {
		t.Errorf("a failed record carries data %s", rec.Data)
	}
	again := mustCall(t, app, Request{Tool: "fail", Arguments: json.RawMessage(`{"message": "card declined"}`), RequestID: "f1"})
	if !again.Replayed || again.Record.Status != store.StatusFailed || string(again.Record.Error) != string(rec.Error) {
		t.Errorf("retry = %+v, want the failure replayed", again)
	}

	// Without a message it still fails, with a message of its own.
	resp = mustCall(t, app, Request{Tool: "fail"})
	e = recordedError(t, resp.Record)
	if resp.Record.Status != store.StatusFailed || e["code"] != CodeToolError || e["message"] == "" {
		t.Errorf("fail without a message = %s %s", resp.Record.Status, resp.Record.Error)
	}
}

// TestDemoLookupIsUnrecorded: the demo tool lookup is read_only: its
// answer is the arguments, says recorded:false, and leaves no record, so
// its retry runs it again.
func TestDemoLookupIsUnrecorded(t *testing.T) {
	app := demoApp(t)
	req := Request{Tool: "lookup", RequestID: "r1", Arguments: json.RawMessage(`{"q":1}`)}
	for range 2 {
		resp, err := app.Call(t.Context(), Caller{Principal: "p"}, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Replayed || string(resp.Record.Data) != `{"q":1}` {
			t.Fatalf("lookup: %+v, want its arguments, run again", resp)
		}
	}
	if _, err := app.Store().Lookup(t.Context(), store.Key{Principal: "p", RequestID: "r1"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("lookup left a record: %v", err)
	}
}
