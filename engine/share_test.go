package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// startGated starts n calls of the gated tool for caller in the
// background and returns their errors' channel (each call's error, or nil,
// once it returns).
func startGated(app *engine.Runtime, caller engine.Caller, prefix string, n int) <-chan error {
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := app.Call(context.Background(), caller, engine.Request{Tool: "gated", RequestID: fmt.Sprintf("%s-%d", prefix, i)})
			errs <- err
		}()
	}
	return errs
}

// waitStarted waits for n tools to start.
func waitStarted(t *testing.T, g *gate, n int) {
	t.Helper()
	for range n {
		select {
		case <-g.started:
		case <-t.Context().Done():
			t.Fatal("the tools did not start")
		}
	}
}

// TestRunningShareKeepsOthersServed is issue 14's burst: one tenant sends
// as many calls at once as the node may run. With a per-principal share,
// only its share runs (the rest answer UNAVAILABLE naming the principal
// and the limit, reserve nothing and run nothing), and another tenant and
// the admin are still served.
func TestRunningShareKeepsOthersServed(t *testing.T) {
	app := newApp(t, engine.WithMaxRunning(8), engine.WithMaxRunningPerPrincipal(2))
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "gated", Func: g.fn})
	tenant := engine.Caller{Principal: "tenant-a"}
	burst := startGated(app, tenant, "burst", 8)
	waitStarted(t, g, 2)
	for range 6 {
		err := <-burst
		var be *engine.BusyError
		if !errors.As(err, &be) || be.Principal != "tenant-a" || be.Limit != engine.LimitMaxRunningPerPrincipal ||
			store.CodeOf(err) != store.CodeUnavailable || !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("a call over the tenant's share: %v, want UNAVAILABLE naming tenant-a and max_running_per_principal", err)
		}
		if be.Fields()["principal"] != "tenant-a" {
			t.Fatalf("envelope fields %v, want the principal", be.Fields())
		}
	}
	// The refused calls reserved nothing.
	page, err := app.Store().List(context.Background(), store.ListQuery{Principal: "tenant-a"})
	if err != nil || len(page.Records) != 2 {
		t.Fatalf("tenant-a holds %d records (%v), want the 2 that run", len(page.Records), err)
	}
	// Another tenant and the admin still run tools.
	other := startGated(app, engine.Caller{Principal: "tenant-b"}, "other", 2)
	admin := startGated(app, engine.Caller{Principal: "admin", Admin: true}, "admin", 2)
	waitStarted(t, g, 4)
	if n := app.Running(); n != 6 {
		t.Fatalf("%d tools run, want 6", n)
	}
	close(g.release)
	for _, ch := range []<-chan error{burst, burst, other, other, admin, admin} {
		if err := <-ch; err != nil {
			t.Fatalf("a call within the bounds: %v", err)
		}
	}
}

// TestAdminReserve checks that tenants together never take the last
// MaxRunning/8 slots (at least 1), even when each one's share is the whole
// node: the admin's calls still run, and the tenant's refusal says why.
func TestAdminReserve(t *testing.T) {
	app := newApp(t, engine.WithMaxRunning(8), engine.WithMaxRunningPerPrincipal(8))
	g := newGate()
	mustAdd(t, app, engine.ToolSpec{Name: "gated", Func: g.fn})
	burst := startGated(app, engine.Caller{Principal: "tenant-a"}, "burst", 8)
	waitStarted(t, g, 7)
	err := <-burst
	var be *engine.BusyError
	if !errors.As(err, &be) || be.Limit != engine.LimitAdminReserve || be.N != 7 {
		t.Fatalf("the 8th tenant call: %v, want UNAVAILABLE for the admin's reserve at 7", err)
	}
	admin := startGated(app, engine.Caller{Principal: "admin", Admin: true}, "admin", 1)
	waitStarted(t, g, 1)
	// The node is full now: even the admin is refused, by max_running.
	_, err = app.Call(context.Background(), engine.Caller{Principal: "admin", Admin: true}, engine.Request{Tool: "gated", RequestID: "one-too-many"})
	if !errors.As(err, &be) || be.Limit != engine.LimitMaxRunning {
		t.Fatalf("a call over max_running: %v, want UNAVAILABLE for max_running", err)
	}
	close(g.release)
	for _, ch := range []<-chan error{burst, burst, burst, burst, burst, burst, burst, admin} {
		if err := <-ch; err != nil {
			t.Fatalf("a call within the bounds: %v", err)
		}
	}
}
