package mcpgateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/mcpgateway"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// docs/guarantees.md at the gateway: a request that reached the upstream but got no
// whole answer — the HTTP upstream hung up after reading it, the stdio
// child died while running it — may have had its effect, so the
// execution is interrupted, not failed, and its retries are uncertain;
// the tool is never run again by a retry.

func TestHTTPUpstreamHangsUpAfterTheRequest(t *testing.T) {
	f := newFakeUpstream(t)
	rt := newRuntime(t)
	startUpstream(t, rt, httpConfig(f))
	waitTool(t, rt, "tickets.text")
	f.drop.Store("text")
	req := engine.Request{Tool: "tickets.text", RequestID: "lost"}
	_, err := rt.Call(t.Context(), alice, req)
	var ue *store.UncertainError
	if !errors.As(err, &ue) || ue.Record.Status != store.StatusInterrupted {
		t.Fatalf("a call whose answer was lost: %v; want EXECUTION_UNCERTAIN, interrupted", err)
	}
	f.drop.Store("")
	_, err = rt.Call(t.Context(), alice, req)
	if !errors.As(err, &ue) || ue.Record.Status != store.StatusInterrupted {
		t.Fatalf("its retry: %v; want EXECUTION_UNCERTAIN, interrupted", err)
	}
	rec, lerr := rt.Store().Lookup(t.Context(), store.Key{Principal: alice.Principal, RequestID: "lost"})
	if lerr != nil || rec.Status != store.StatusInterrupted {
		t.Fatalf("the record: %+v, %v; want interrupted", rec, lerr)
	}
}

func TestStdioChildDiesMidCall(t *testing.T) {
	bin, err := buildStdioServer()
	if err != nil {
		t.Fatal(err)
	}
	countFile := filepath.Join(t.TempDir(), "count")
	rt := newRuntime(t)
	startUpstream(t, rt, mcpgateway.Config{Name: "local", Command: []string{bin, "-count", countFile}})
	waitTool(t, rt, "local.exit")
	req := engine.Request{Tool: "local.exit", RequestID: "died"}
	_, err = rt.Call(t.Context(), alice, req)
	var ue *store.UncertainError
	if !errors.As(err, &ue) || ue.Record.Status != store.StatusInterrupted {
		t.Fatalf("a call whose child died: %v; want EXECUTION_UNCERTAIN, interrupted", err)
	}
	// The child is replaced; the retry is still uncertain, and the tool
	// ran once.
	waitTool(t, rt, "local.exit")
	// The group is unavailable while the child restarts.
	wait.For(t, 30*time.Second, "the retry to be answered", func() error {
		_, err = rt.Call(t.Context(), alice, req)
		if errors.Is(err, store.ErrUnavailable) {
			return err
		}
		return nil
	})
	if !errors.As(err, &ue) || ue.Record.Status != store.StatusInterrupted {
		t.Fatalf("its retry: %v; want EXECUTION_UNCERTAIN, interrupted", err)
	}
	raw, err := os.ReadFile(countFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "exit died"); n != 1 {
		t.Fatalf("the tool ran %d times, want 1:\n%s", n, raw)
	}
}

// An MCP server's reconcile_tool settles its tools' interrupted
// executions (docs/config.md#reconcile-probes): found resolves completed with its data, by
// "probe"; not found releases, and the retry runs the tool once.
func TestReconcileTool(t *testing.T) {
	t.Parallel()
	f := newFakeUpstream(t)
	rt := newRuntime(t)
	cfg := httpConfig(f)
	cfg.ReconcileTool = "find"
	startUpstream(t, rt, cfg)
	waitTool(t, rt, "tickets.text")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); rt.RunProbes(ctx, nil) }()
	defer func() { cancel(); <-done }()

	lose := func(id string) {
		t.Helper()
		f.drop.Store("text")
		defer f.drop.Store("")
		_, err := rt.Call(t.Context(), alice, engine.Request{Tool: "tickets.text", RequestID: id})
		var ue *store.UncertainError
		if !errors.As(err, &ue) || ue.Record.Status != store.StatusInterrupted {
			t.Fatalf("a call whose answer was lost: %v; want interrupted", err)
		}
	}
	waitRecord := func(id, what string, ok func(store.Record, error) bool) store.Record {
		t.Helper()
		var rec store.Record
		wait.For(t, 15*time.Second, what, func() error {
			var err error
			rec, err = rt.Store().Lookup(t.Context(), store.Key{Principal: alice.Principal, RequestID: id})
			if ok(rec, err) {
				return nil
			}
			return fmt.Errorf("%+v, %v", rec, err)
		})
		return rec
	}

	f.find.Store(1)
	lose("found")
	rec := waitRecord("found", "resolved by the probe", func(r store.Record, err error) bool { return err == nil && r.Status.Finished() })
	if rec.Status != store.StatusCompleted || rec.ResolvedBy != store.ResolvedByProbe || string(rec.Data) != `{"order":99}` {
		t.Fatalf("after the probe: %+v", rec)
	}
	var asked map[string]any
	last, _ := f.lastFind.Load().(string)
	if err := json.Unmarshal([]byte(last), &asked); err != nil || asked["tool"] != "text" || asked["execution_id"] != rec.ExecutionID ||
		asked["request_id"] != "found" || !strings.HasPrefix(asked["idempotency_key"].(string), "carmy_") {
		t.Fatalf("the probe was asked %s", last)
	}

	f.find.Store(2)
	lose("missing")
	waitRecord("missing", "released by the probe", func(_ store.Record, err error) bool { return errors.Is(err, store.ErrNotFound) })
	before := f.runsOf("text", "missing")
	again := mustCall(t, rt, engine.Request{Tool: "tickets.text", RequestID: "missing"})
	if again.Replayed || again.Record.Status != store.StatusCompleted || f.runsOf("text", "missing") != before+1 {
		t.Fatalf("the retry after the release: %+v, runs %d → %d", again, before, f.runsOf("text", "missing"))
	}
}
