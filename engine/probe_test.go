package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// probeCounter is an Observer that counts probes by outcome.
type probeCounter struct {
	noObserver
	mu    sync.Mutex
	got   map[string]int
	scans atomic.Int64
}

func (p *probeCounter) Probed(tool, outcome string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.got == nil {
		p.got = map[string]int{}
	}
	p.got[outcome]++
}

// owner is RunProbes' owner, always true, counting the scans.
func (p *probeCounter) owner() bool {
	p.scans.Add(1)
	return true
}

// waitScans waits until n more scans have begun.
func (p *probeCounter) waitScans(t *testing.T, n int64) {
	t.Helper()
	target := p.scans.Load() + n
	wait.Until(t, 15*time.Second, fmt.Sprintf("the prober to scan %d more times", n), func() bool { return p.scans.Load() >= target })
}

func (p *probeCounter) count(outcome string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got[outcome]
}

// probedUpstream is an HTTP upstream whose tool (POST /orders) loses its
// answer while lose is set (it reads the request, then hangs up), and
// answers {"order_id":1} otherwise; and whose probe (GET
// /orders/by-key/<key>) answers with probe's status and body (or
// probeEcho's body for the probe's request, when set). The tool is
// configured with headers.
type probedUpstream struct {
	lose        atomic.Bool
	calls       atomic.Int32 // requests the tool got
	probes      atomic.Int32 // requests the probe got
	probeStatus atomic.Int32
	probeBody   string
	probeEcho   func(r *http.Request) string
	headers     map[string]string
	lastKey     atomic.Value
}

func (u *probedUpstream) handler(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/orders/by-key/") {
		u.probes.Add(1)
		u.lastKey.Store(strings.TrimPrefix(r.URL.Path, "/orders/by-key/"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(u.probeStatus.Load()))
		if u.probeEcho != nil {
			io.WriteString(w, u.probeEcho(r))
			return
		}
		io.WriteString(w, u.probeBody)
		return
	}
	u.calls.Add(1)
	io.Copy(io.Discard, r.Body)
	if u.lose.Load() {
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"order_id":1}`)
}

// probedApp returns a runtime with the tool create_order over up, whose
// probe gives up after giveUp, probing in the background; and its probe
// counter.
func probedApp(t *testing.T, up *probedUpstream, giveUp time.Duration) (*Runtime, *probeCounter) {
	t.Helper()
	srv := newFakeUpstream(t, up.handler)
	obs := &probeCounter{}
	app := New(WithLogger(slog.New(slog.DiscardHandler)), WithObserver(obs))
	h := HTTPTool{URL: srv.URL + "/orders", ReconcileURL: srv.URL + "/orders/by-key/{idempotency_key}", Headers: up.headers, Logger: slog.New(slog.DiscardHandler)}
	fn, err := h.Func()
	if err != nil {
		t.Fatal(err)
	}
	probe, err := h.Probe()
	if err != nil || probe == nil {
		t.Fatalf("Probe: %v, %v", probe, err)
	}
	if err := app.AddTool(ToolSpec{Name: "create_order", Func: fn, Probe: probe, ProbeGiveUp: giveUp, Timeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); app.RunProbes(ctx, obs.owner) }()
	t.Cleanup(func() {
		cancel()
		<-done
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		app.Shutdown(sctx)
	})
	return app, obs
}

// loseAnswer makes a call whose answer is lost, and checks it is
// interrupted.
func loseAnswer(t *testing.T, app *Runtime, up *probedUpstream, req Request) store.Record {
	t.Helper()
	up.lose.Store(true)
	_, err := app.Call(t.Context(), Caller{Principal: "p"}, req)
	up.lose.Store(false)
	var ue *store.UncertainError
	if !errors.As(err, &ue) || ue.Record.Status != store.StatusInterrupted {
		t.Fatalf("Call with its answer lost: %v; want uncertain, interrupted", err)
	}
	return ue.Record
}

// waitRecord polls the identity's record until ok accepts it (or it is
// gone, as ok may accept), for at most 10 s.
func waitRecord(t *testing.T, app *Runtime, key store.Key, what string, ok func(store.Record, error) bool) store.Record {
	t.Helper()
	var rec store.Record
	wait.For(t, 10*time.Second, what, func() error {
		var err error
		rec, err = app.Store().Lookup(t.Context(), key)
		if ok(rec, err) {
			return nil
		}
		return fmt.Errorf("still %+v, %v", rec, err)
	})
	return rec
}

// A lost answer, then a probe that finds the effect: resolved completed
// with the probe's data, by "probe", and replayed so; the tool ran once.
func TestProbeFoundResolvesCompleted(t *testing.T) {
	t.Parallel()
	up := &probedUpstream{probeBody: `{"order_id":42}`}
	up.probeStatus.Store(http.StatusOK)
	app, obs := probedApp(t, up, time.Hour)
	req := Request{Tool: "create_order", RequestID: "order-1"}
	lost := loseAnswer(t, app, up, req)
	key := store.Key{Principal: "p", RequestID: "order-1"}
	rec := waitRecord(t, app, key, "resolved by the probe", func(r store.Record, err error) bool { return err == nil && r.Status.Finished() })
	if rec.ExecutionID != lost.ExecutionID || rec.Status != store.StatusCompleted || !rec.Resolved ||
		rec.ResolvedBy != store.ResolvedByProbe || string(rec.Data) != `{"order_id":42}` {
		t.Fatalf("after the probe: %+v; want %s completed with the probe's data, resolved by probe", rec, lost.ExecutionID)
	}
	if got, want := up.lastKey.Load(), key.IdempotencyKey(); got != want {
		t.Errorf("the probe asked about %v, want the idempotency key %s", got, want)
	}
	again, err := app.Call(t.Context(), Caller{Principal: "p"}, req)
	if err != nil || !again.Replayed || again.Record.ResolvedBy != store.ResolvedByProbe {
		t.Fatalf("retry = %+v, %v; want the replay, resolved by probe", again, err)
	}
	if n := up.calls.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want 1", n)
	}
	if obs.count(ProbeCompleted) != 1 {
		t.Errorf("probes counted %v, want one completed", obs.got)
	}
}

// A probe that says 404: the reservation is released, and the retry runs
// the tool, once.
func TestProbeNotFoundReleases(t *testing.T) {
	t.Parallel()
	up := &probedUpstream{probeBody: `{"error":"no such order"}`}
	up.probeStatus.Store(http.StatusNotFound)
	app, obs := probedApp(t, up, time.Hour)
	req := Request{Tool: "create_order", RequestID: "order-2"}
	loseAnswer(t, app, up, req)
	key := store.Key{Principal: "p", RequestID: "order-2"}
	waitRecord(t, app, key, "released by the probe", func(_ store.Record, err error) bool { return errors.Is(err, store.ErrNotFound) })
	resp, err := app.Call(t.Context(), Caller{Principal: "p"}, req)
	if err != nil || resp.Replayed || resp.Record.Status != store.StatusCompleted {
		t.Fatalf("retry after the release = %+v, %v; want a fresh completed run", resp, err)
	}
	if n := up.calls.Load(); n != 2 {
		t.Errorf("the tool got %d requests, want 2 (the lost one, and the retry)", n)
	}
	if obs.count(ProbeReleased) != 1 {
		t.Errorf("probes counted %v, want one released", obs.got)
	}
}

// A probe that never decides is tried again with a growing pause until
// its give-up time, then no more; the execution stays interrupted.
func TestProbeUndecidedGivesUp(t *testing.T) {
	t.Parallel()
	up := &probedUpstream{probeBody: `{}`}
	up.probeStatus.Store(http.StatusInternalServerError)
	app, obs := probedApp(t, up, 1500*time.Millisecond)
	req := Request{Tool: "create_order", RequestID: "order-3"}
	loseAnswer(t, app, up, req)
	wait.Until(t, 15*time.Second, "the probe to give up", func() bool { return obs.count(ProbeGaveUp) > 0 })
	probes := up.probes.Load()
	if probes < 1 || obs.count(ProbeUndecided) != int(probes) {
		t.Fatalf("%d probes, counted %v; want at least one, each undecided", probes, obs.got)
	}
	rec, err := app.Store().Lookup(t.Context(), store.Key{Principal: "p", RequestID: "order-3"})
	if err != nil || rec.Status != store.StatusInterrupted {
		t.Fatalf("after giving up: %+v, %v; want still interrupted", rec, err)
	}
	// Past its give-up time the execution is asked about no more.
	obs.waitScans(t, 3)
	if n := up.probes.Load(); n != probes {
		t.Fatalf("%d probes after giving up, want %d", n, probes)
	}
}

// Only the owner probes.
func TestProbeOnlyWhileOwner(t *testing.T) {
	t.Parallel()
	up := &probedUpstream{probeBody: `{"order_id":1}`}
	up.probeStatus.Store(http.StatusOK)
	srv := newFakeUpstream(t, up.handler)
	h := HTTPTool{URL: srv.URL + "/orders", ReconcileURL: srv.URL + "/orders/by-key/{idempotency_key}", Headers: up.headers, Logger: slog.New(slog.DiscardHandler)}
	fn, _ := h.Func()
	probe, _ := h.Probe()
	app := quietApp(t)
	if err := app.AddTool(ToolSpec{Name: "create_order", Func: fn, Probe: probe, Timeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	loseAnswer(t, app, up, Request{Tool: "create_order", RequestID: "order-4"})
	var owner atomic.Bool
	var asked atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		app.RunProbes(ctx, func() bool { asked.Add(1); return owner.Load() })
	}()
	defer func() { cancel(); <-done }()
	wait.Until(t, 15*time.Second, "two scans while not the owner", func() bool { return asked.Load() >= 2 })
	if n := up.probes.Load(); n != 0 {
		t.Fatalf("%d probes while not the owner, want 0", n)
	}
	owner.Store(true)
	waitRecord(t, app, store.Key{Principal: "p", RequestID: "order-4"}, "resolved once the owner", func(r store.Record, err error) bool {
		return err == nil && r.Status == store.StatusCompleted
	})
}
