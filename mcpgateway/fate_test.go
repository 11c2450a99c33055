package mcpgateway_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/mcpgateway"
	"github.com/carmyhq/carmy/store"
)

// SPEC §1 at the gateway: a request that reached the upstream but got no
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = rt.Call(t.Context(), alice, req)
		if !errors.Is(err, store.ErrUnavailable) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the group is unavailable while the child restarts
	}
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
