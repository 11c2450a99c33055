package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

var benchArgs = json.RawMessage(`{"sku":"KB-01","quantity":2,"express":true,"note":"gift wrap"}`)

// benchApp returns a runtime with an "echo" tool over an in-memory store
// large enough never to fill, shut down at cleanup.
func benchApp(b *testing.B) *engine.Runtime {
	b.Helper()
	app := engine.New(engine.WithLogger(quietLogger()))
	app.IdempotencyStore(store.NewMemory(math.MaxInt32))
	app.Tool("echo", func(_ context.Context, call engine.Call) (any, error) { return call.Arguments, nil })
	if err := app.Err(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := app.Shutdown(ctx); err != nil {
			b.Errorf("Shutdown: %v", err)
		}
	})
	return app
}

// benchCall makes one call with a fresh request_id n and checks that the
// tool ran.
func benchCall(ctx context.Context, app *engine.Runtime, n int64) error {
	req := engine.Request{Tool: "echo", Arguments: benchArgs, RequestID: "req-" + strconv.FormatInt(n, 10)}
	resp, err := app.Call(ctx, alice, req)
	if err == nil && (resp.Replayed || resp.Record.Status != store.StatusCompleted) {
		err = fmt.Errorf("call %s: status %s, replayed %v", req.RequestID, resp.Record.Status, resp.Replayed)
	}
	return err
}

// BenchmarkRuntimeCall measures Runtime.Call end to end (validate,
// fingerprint, reserve, run the tool, complete) with a fresh request_id.
func BenchmarkRuntimeCall(b *testing.B) {
	app := benchApp(b)
	ctx := context.Background()
	b.ReportAllocs()
	var n int64
	for b.Loop() {
		n++
		if err := benchCall(ctx, app, n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRuntimeCallParallel measures Runtime.Call with fresh
// request_ids from GOMAXPROCS goroutines sharing one runtime.
func BenchmarkRuntimeCallParallel(b *testing.B) {
	app := benchApp(b)
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := benchCall(ctx, app, n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRuntimeCallReplay measures Runtime.Call of a request_id whose
// execution finished: answered from the record, the tool does not run.
func BenchmarkRuntimeCallReplay(b *testing.B) {
	app := benchApp(b)
	ctx := context.Background()
	req := engine.Request{Tool: "echo", Arguments: benchArgs, RequestID: "req-replayed"}
	if _, err := app.Call(ctx, alice, req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := app.Call(ctx, alice, req)
		if err != nil || !resp.Replayed {
			b.Fatalf("Call = replayed %v, %v; want a replay", resp.Replayed, err)
		}
	}
}

// BenchmarkRuntimeCallReadOnly measures Runtime.Call of a read-only tool
// (docs/policy.md) with a fresh request_id: validate and run the tool,
// nothing reserved or recorded. Against BenchmarkRuntimeCall it is the
// cost a recorded call adds (docs/performance.md).
func BenchmarkRuntimeCallReadOnly(b *testing.B) {
	app := benchApp(b)
	app.Tool("lookup", func(_ context.Context, call engine.Call) (any, error) { return call.Arguments, nil },
		engine.WithEffects(engine.EffectsReadOnly))
	ctx := context.Background()
	b.ReportAllocs()
	var n int64
	for b.Loop() {
		n++
		req := engine.Request{Tool: "lookup", Arguments: benchArgs, RequestID: "req-" + strconv.FormatInt(n, 10)}
		resp, err := app.Call(ctx, alice, req)
		if err != nil || !resp.Passthrough {
			b.Fatalf("call %d: %v, passthrough %v", n, err, resp.Passthrough)
		}
	}
}
