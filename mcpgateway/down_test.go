package mcpgateway_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/mcpgateway"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// A finished identity replays whatever the state of its upstream, a
// conflicting one is still a conflict and an interrupted one uncertain:
// while an upstream is down (its tools' group unavailable), only a call
// that would run the tool (a new identity, or none) is refused with
// UNAVAILABLE, and it reserves nothing.

// watchedRegistry is a runtime as an Upstream's registry, which tells
// whether the upstream's group is available now.
type watchedRegistry struct {
	*engine.Runtime
	up atomic.Bool
}

func (w *watchedRegistry) SetToolGroup(prefix string, specs []engine.ToolSpec) error {
	err := w.Runtime.SetToolGroup(prefix, specs)
	if err == nil {
		w.up.Store(true)
	}
	return err
}

func (w *watchedRegistry) SetToolGroupUnavailable(prefix string, why error) error {
	err := w.Runtime.SetToolGroupUnavailable(prefix, why)
	w.up.Store(false)
	return err
}

// startWatched starts an Upstream of rt through a watchedRegistry.
func startWatched(t *testing.T, rt *engine.Runtime, cfg mcpgateway.Config) *watchedRegistry {
	t.Helper()
	reg := &watchedRegistry{Runtime: rt}
	cfg.Logger, cfg.MaxBackoff = quietLogger(), 200*time.Millisecond
	u, err := mcpgateway.New(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return reg
}

// checkAnsweredWhileDown checks, once the group of done (a completed
// call) and lost (an interrupted one) is down, that their retries are
// answered from their records and that a new identity is refused.
func checkAnsweredWhileDown(t *testing.T, rt *engine.Runtime, done, lost engine.Request, first store.Record) {
	t.Helper()
	for range 2 {
		resp, err := rt.Call(t.Context(), alice, done)
		if err != nil || !resp.Replayed || resp.Record.ExecutionID != first.ExecutionID || string(resp.Record.Data) != string(first.Data) {
			t.Fatalf("a retry of a completed identity while its upstream is down: %+v, %v; want its replay", resp, err)
		}
	}
	other := done
	other.Arguments = json.RawMessage(`{"sku":"other"}`)
	var ce *store.ConflictError
	if _, err := rt.Call(t.Context(), alice, other); !errors.As(err, &ce) || ce.Record.ExecutionID != first.ExecutionID {
		t.Fatalf("the same request_id with other arguments: %v; want IDEMPOTENCY_CONFLICT", err)
	}
	var ue *store.UncertainError
	if _, err := rt.Call(t.Context(), alice, lost); !errors.As(err, &ue) || ue.Record.Status != store.StatusInterrupted {
		t.Fatalf("a retry of an interrupted identity: %v; want EXECUTION_UNCERTAIN", err)
	}
	fresh := done
	fresh.RequestID = done.RequestID + "-new"
	if _, err := rt.Call(t.Context(), alice, fresh); store.CodeOf(err) != store.CodeUnavailable {
		t.Fatalf("a new identity while the upstream is down: %v; want UNAVAILABLE", err)
	}
	if _, err := rt.Store().Lookup(t.Context(), store.Key{Principal: alice.Principal, RequestID: fresh.RequestID}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused call left a record: %v", err)
	}
	unrecorded := done
	unrecorded.RequestID = ""
	if _, err := rt.Call(t.Context(), alice, unrecorded); store.CodeOf(err) != store.CodeUnavailable {
		t.Fatalf("a call without request_id while the upstream is down: %v; want UNAVAILABLE", err)
	}
}

func TestHTTPUpstreamDownReplaysRecords(t *testing.T) {
	t.Parallel()
	f := newFakeUpstream(t)
	rt := newRuntime(t)
	reg := startWatched(t, rt, httpConfig(f))
	waitTool(t, rt, "tickets.create")
	done := engine.Request{Tool: "tickets.create", RequestID: "down-1", Arguments: json.RawMessage(`{"sku":"KB-01"}`)}
	first := mustCall(t, rt, done)
	if first.Record.Status != store.StatusCompleted {
		t.Fatalf("first call: %s %s", first.Record.Status, first.Record.Error)
	}
	f.drop.Store("text")
	lost := engine.Request{Tool: "tickets.text", RequestID: "down-2"}
	var ue *store.UncertainError
	if _, err := rt.Call(t.Context(), alice, lost); !errors.As(err, &ue) {
		t.Fatalf("a call whose answer was lost: %v; want EXECUTION_UNCERTAIN", err)
	}

	f.Server.CloseClientConnections()
	f.Server.Close()
	wait.Until(t, 30*time.Second, "the upstream's tools to be marked unavailable", func() bool { return !reg.up.Load() })
	checkAnsweredWhileDown(t, rt, done, lost, first.Record)
	if n := f.runsOf("create", "down-1"); n != 1 {
		t.Fatalf("the upstream ran down-1 %d times, want 1", n)
	}
}

func TestStdioUpstreamDownReplaysRecords(t *testing.T) {
	t.Parallel()
	bin := stdioServer(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh to start the stdio server with")
	}
	dir := t.TempDir()
	stop, countFile := filepath.Join(dir, "stop"), filepath.Join(dir, "count")
	rt := newRuntime(t)
	// The child is started again whenever it dies, unless stop exists.
	reg := startWatched(t, rt, mcpgateway.Config{Name: "local",
		Command: []string{sh, "-c", `test -e "$0" && exit 1; exec "$1" -count "$2"`, stop, bin, countFile}})
	waitTool(t, rt, "local.create")
	done := engine.Request{Tool: "local.create", RequestID: "down-1", Arguments: json.RawMessage(`{"sku":"X"}`)}
	first := mustCall(t, rt, done)
	if first.Record.Status != store.StatusCompleted {
		t.Fatalf("first call: %s %s", first.Record.Status, first.Record.Error)
	}
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The child dies while it runs this call: interrupted, and the
	// upstream is down for good.
	lost := engine.Request{Tool: "local.exit", RequestID: "down-2"}
	var ue *store.UncertainError
	if _, err := rt.Call(t.Context(), alice, lost); !errors.As(err, &ue) {
		t.Fatalf("a call whose child died: %v; want EXECUTION_UNCERTAIN", err)
	}
	wait.Until(t, 30*time.Second, "the upstream's tools to be marked unavailable", func() bool { return !reg.up.Load() })
	checkAnsweredWhileDown(t, rt, done, lost, first.Record)
	if got := lines(t, countFile); len(got) != 2 || got[0] != "create|down-1" || got[1] != "exit|down-2" {
		t.Fatalf("executions: %v; want create|down-1 and exit|down-2", got)
	}
}
