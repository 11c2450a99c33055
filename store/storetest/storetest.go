package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

// Factory returns a new, empty store holding at most capacity records.
type Factory func(t *testing.T, capacity int) store.Store

// Run runs the whole conformance suite against stores made by newStore.
func Run(t *testing.T, newStore Factory) {
	cases := []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"ReserveNew", testReserveNew},
		{"ReplayFinished", testReplayFinished},
		{"Conflict", testConflict},
		{"UncertainWhileOpen", testUncertainWhileOpen},
		{"CompleteOnlyByOwner", testCompleteOnlyByOwner},
		{"CompleteInterrupted", testCompleteInterrupted},
		{"CompleteRejectsMalformed", testCompleteRejectsMalformed},
		{"CapacityFailsClosed", testCapacityFailsClosed},
		{"PrincipalQuota", testPrincipalQuota},
		{"ByteQuota", testByteQuota},
		{"StoreBytes", testStoreBytes},
		{"DedupeWindow", testDedupeWindow},
		{"DedupeWindowRefused", testDedupeWindowRefused},
		{"RetryUncertain", testRetryUncertain},
		{"Cancel", testCancel},
		{"Resolve", testResolve},
		{"Release", testRelease},
		{"IdentitiesAreDistinct", testIdentitiesAreDistinct},
		{"GetAndLookup", testGetAndLookup},
		{"ListSession", testListSession},
		{"ListFilters", testListFilters},
		{"ListFilteredPages", testListFilteredPages},
		{"RunningNodes", testRunningNodes},
		{"ConcurrentReserve", testConcurrentReserve},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newStore)
		})
	}
}

var execSeq atomic.Uint64

var epoch = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// newExec returns an execution with a fresh id.
func newExec(tool string) store.Execution {
	n := execSeq.Add(1)
	return store.Execution{
		ID:        fmt.Sprintf("exec_conformance_%d_%d", time.Now().UnixNano(), n),
		Tool:      tool,
		NodeID:    "node-a",
		StartedAt: epoch.Add(time.Duration(n) * time.Millisecond),
	}
}

func key(req string) store.Key {
	return store.Key{Principal: "alice", Session: "s1", RequestID: req}
}

func completed(id string, data string) store.Result {
	return store.Result{ExecutionID: id, Status: store.StatusCompleted, Data: json.RawMessage(data), FinishedAt: epoch.Add(time.Hour)}
}

func failedWith(id string, status store.Status, code string) store.Result {
	return store.Result{
		ExecutionID: id, Status: status, FinishedAt: epoch.Add(time.Hour),
		Error: json.RawMessage(fmt.Sprintf(`{"code":%q,"message":"m"}`, code)),
	}
}

func mustReserve(t *testing.T, s store.Store, k store.Key, fp string, ex store.Execution, want store.Outcome) store.Record {
	t.Helper()
	res, err := s.Reserve(context.Background(), k, fp, ex)
	if err != nil {
		t.Fatalf("Reserve(%s): %v", k, err)
	}
	if res.Outcome != want {
		t.Fatalf("Reserve(%s) = %v, want %v (record %+v)", k, res.Outcome, want, res.Record)
	}
	return res.Record
}

func mustComplete(t *testing.T, s store.Store, k store.Key, fp string, res store.Result) store.Record {
	t.Helper()
	rec, err := s.Complete(context.Background(), k, fp, res)
	if err != nil {
		t.Fatalf("Complete(%s): %v", k, err)
	}
	return rec
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

func wantState(t *testing.T, what string, err error, status store.Status) {
	t.Helper()
	var se *store.StateError
	if !errors.As(err, &se) {
		t.Fatalf("%s: err = %v, want *StateError", what, err)
	}
	if !errors.Is(err, store.ErrInvalidState) {
		t.Fatalf("%s: StateError does not match ErrInvalidState", what)
	}
	if se.Record.Status != status {
		t.Fatalf("%s: StateError status %s, want %s", what, se.Record.Status, status)
	}
}

func testReserveNew(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ex := newExec("echo")
	rec := mustReserve(t, s, key("r1"), "fp1", ex, store.Reserved)
	if rec.ExecutionID != ex.ID || rec.Status != store.StatusRunning || rec.Tool != "echo" ||
		rec.NodeID != ex.NodeID || rec.Fingerprint != "fp1" || rec.Key != key("r1") || !rec.StartedAt.Equal(ex.StartedAt) {
		t.Fatalf("reserved record = %+v", rec)
	}
	if rec.Seq == 0 {
		t.Fatal("reserved record has Seq 0")
	}
	rec2 := mustReserve(t, s, key("r2"), "fp1", newExec("echo"), store.Reserved)
	if rec2.Seq <= rec.Seq {
		t.Fatalf("Seq did not grow: %d then %d", rec.Seq, rec2.Seq)
	}
	st, err := s.Stats(context.Background())
	if err != nil || st.Entries != 2 || st.Capacity != 10 {
		t.Fatalf("Stats = %+v, %v; want 2 entries of 10", st, err)
	}
}

func testReplayFinished(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	for i, res := range []func(id string) store.Result{
		func(id string) store.Result { return completed(id, `{"order_id":1}`) },
		func(id string) store.Result { return failedWith(id, store.StatusFailed, "TOOL_ERROR") },
		func(id string) store.Result { return failedWith(id, store.StatusTimedOut, "TIMEOUT") },
		func(id string) store.Result { return failedWith(id, store.StatusCancelled, "CANCELLED") },
	} {
		k := key(fmt.Sprintf("replay-%d", i))
		ex := newExec("t")
		mustReserve(t, s, k, "fp", ex, store.Reserved)
		want := res(ex.ID)
		done := mustComplete(t, s, k, "fp", want)
		if done.Status != want.Status || string(done.Data) != string(want.Data) || string(done.Error) != string(want.Error) {
			t.Fatalf("completed record = %+v, want result %+v", done, want)
		}
		again := mustReserve(t, s, k, "fp", newExec("t"), store.Replay)
		if again.ExecutionID != ex.ID || again.Status != want.Status || string(again.Data) != string(want.Data) ||
			string(again.Error) != string(want.Error) || !again.FinishedAt.Equal(want.FinishedAt) {
			t.Fatalf("replay = %+v, want the recorded %+v", again, done)
		}
	}
}

func testConflict(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	k := key("c1")
	ex := newExec("t")
	mustReserve(t, s, k, "fp-a", ex, store.Reserved)
	if rec := mustReserve(t, s, k, "fp-b", newExec("t"), store.Conflict); rec.ExecutionID != ex.ID {
		t.Fatalf("conflict while running names %s, want %s", rec.ExecutionID, ex.ID)
	}
	mustComplete(t, s, k, "fp-a", completed(ex.ID, `1`))
	if rec := mustReserve(t, s, k, "fp-b", newExec("t"), store.Conflict); rec.ExecutionID != ex.ID {
		t.Fatalf("conflict when finished names %s, want %s", rec.ExecutionID, ex.ID)
	}
}

func testUncertainWhileOpen(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	k := key("u1")
	ex := newExec("t")
	mustReserve(t, s, k, "fp", ex, store.Reserved)
	rec := mustReserve(t, s, k, "fp", newExec("t"), store.Uncertain)
	if rec.ExecutionID != ex.ID || rec.Status != store.StatusRunning {
		t.Fatalf("uncertain while running = %+v", rec)
	}
	other := newExec("t")
	other.NodeID = "node-b"
	mustReserve(t, s, key("u2"), "fp", other, store.Reserved)

	n, err := s.MarkInterrupted(context.Background(), ex.NodeID)
	if err != nil || n != 1 {
		t.Fatalf("MarkInterrupted = %d, %v; want 1", n, err)
	}
	rec = mustReserve(t, s, k, "fp", newExec("t"), store.Uncertain)
	if rec.Status != store.StatusInterrupted {
		t.Fatalf("after MarkInterrupted status = %s, want interrupted", rec.Status)
	}
	if rec, _ := s.Lookup(context.Background(), key("u2")); rec.Status != store.StatusRunning {
		t.Fatalf("another node's execution became %s", rec.Status)
	}
	// The original runner turns out alive: its late result is recorded.
	done := mustComplete(t, s, k, "fp", completed(ex.ID, `"late"`))
	if done.Status != store.StatusCompleted || done.Resolved {
		t.Fatalf("late completion = %+v", done)
	}
}

// testCompleteInterrupted: a runner whose tool's answer was lost records
// the execution interrupted (no data, error or finish time); the record
// is then uncertain to every retry, counted as interrupted, and settled by
// a resolution, a release or the runner's own late result alike.
func testCompleteInterrupted(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	lost := func(id string) store.Result {
		return store.Result{ExecutionID: id, Status: store.StatusInterrupted}
	}
	k := key("lost1")
	ex := newExec("t")
	mustReserve(t, s, k, "fp", ex, store.Reserved)
	rec := mustComplete(t, s, k, "fp", lost(ex.ID))
	if rec.Status != store.StatusInterrupted || len(rec.Data) > 0 || len(rec.Error) > 0 || !rec.FinishedAt.IsZero() {
		t.Fatalf("interrupted by its runner = %+v", rec)
	}
	if rec := mustReserve(t, s, k, "fp", newExec("t"), store.Uncertain); rec.ExecutionID != ex.ID || rec.Status != store.StatusInterrupted {
		t.Fatalf("a retry after the answer was lost = %+v, want uncertain and interrupted", rec)
	}
	if got, err := s.Get(ctx, ex.ID); err != nil || got.Status != store.StatusInterrupted || !got.FinishedAt.IsZero() {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	res, err := s.Resolve(ctx, ex.ID, store.Resolution{Result: completed(ex.ID, `{"found":1}`)})
	if err != nil || res.Status != store.StatusCompleted || !res.Resolved {
		t.Fatalf("Resolve after the answer was lost = %+v, %v", res, err)
	}
	// Once finished, a lost answer is refused like any late completion.
	_, err = s.Complete(ctx, k, "fp", lost(ex.ID))
	wantState(t, "interrupting a finished execution", err, store.StatusCompleted)

	// Released: the next call runs.
	k2 := key("lost2")
	ex2 := newExec("t")
	first := mustReserve(t, s, k2, "fp", ex2, store.Reserved)
	mustComplete(t, s, k2, "fp", lost(ex2.ID))
	if _, err := s.Release(ctx, ex2.ID, false); err != nil {
		t.Fatalf("Release of an execution interrupted by its runner: %v", err)
	}
	// The re-run's fencing token is larger than the released run's, so
	// an upstream refuses a late write of the presumed-dead runner.
	if again := mustReserve(t, s, k2, "fp", newExec("t"), store.Reserved); again.Seq <= first.Seq {
		t.Fatalf("the re-run after a release has Seq %d, not above the released run's %d", again.Seq, first.Seq)
	}

	// Malformed: an interrupted result carries nothing.
	k3 := key("lost3")
	ex3 := newExec("t")
	mustReserve(t, s, k3, "fp", ex3, store.Reserved)
	bad := lost(ex3.ID)
	bad.Data = json.RawMessage(`1`)
	_, err = s.Complete(ctx, k3, "fp", bad)
	wantErr(t, "an interrupted result with data", err, store.ErrInvalid)
	bad = lost(ex3.ID)
	bad.FinishedAt = epoch
	_, err = s.Complete(ctx, k3, "fp", bad)
	wantErr(t, "an interrupted result with a finish time", err, store.ErrInvalid)
}

func testCompleteOnlyByOwner(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	k := key("o1")
	ex := newExec("t")
	mustReserve(t, s, k, "fp", ex, store.Reserved)

	_, err := s.Complete(ctx, k, "fp", completed("exec_someone_else", `1`))
	wantState(t, "complete by another execution", err, store.StatusRunning)
	_, err = s.Complete(ctx, k, "fp-other", completed(ex.ID, `1`))
	wantErr(t, "complete with another fingerprint", err, store.ErrConflict)
	_, err = s.Complete(ctx, key("nobody"), "fp", completed(ex.ID, `1`))
	wantErr(t, "complete of an unknown identity", err, store.ErrNotFound)

	mustComplete(t, s, k, "fp", completed(ex.ID, `1`))
	_, err = s.Complete(ctx, k, "fp", completed(ex.ID, `2`))
	wantState(t, "second complete", err, store.StatusCompleted)
	if rec, _ := s.Lookup(ctx, k); string(rec.Data) != "1" {
		t.Fatalf("second complete changed data to %s", rec.Data)
	}
}

func testCompleteRejectsMalformed(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	k := key("m1")
	ex := newExec("t")
	mustReserve(t, s, k, "fp", ex, store.Reserved)
	bad := []store.Result{
		{ExecutionID: ex.ID, Status: store.StatusRunning, FinishedAt: epoch},
		{ExecutionID: ex.ID, Status: store.StatusCompleted, Data: json.RawMessage(`{`), FinishedAt: epoch},
		{ExecutionID: ex.ID, Status: store.StatusFailed, Error: json.RawMessage(`"x"`), FinishedAt: epoch},
		// The other payload, when present, must be JSON too.
		{ExecutionID: ex.ID, Status: store.StatusCompleted, Data: json.RawMessage(`1`), Error: json.RawMessage(`{x`), FinishedAt: epoch},
		{ExecutionID: ex.ID, Status: store.StatusFailed, Data: json.RawMessage(`[1,`), Error: json.RawMessage(`{"code":"X","message":"m"}`), FinishedAt: epoch},
		{ExecutionID: ex.ID, Status: store.StatusCompleted, Data: json.RawMessage(`1`)},
		{Status: store.StatusCompleted, Data: json.RawMessage(`1`), FinishedAt: epoch},
	}
	for i, res := range bad {
		_, err := s.Complete(ctx, k, "fp", res)
		wantErr(t, fmt.Sprintf("malformed result %d", i), err, store.ErrInvalid)
	}
	if rec, _ := s.Lookup(ctx, k); rec.Status != store.StatusRunning {
		t.Fatalf("malformed results changed the record to %s", rec.Status)
	}
	if _, err := s.Reserve(ctx, store.Key{Principal: "p"}, "fp", newExec("t")); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("reserve with empty request_id: err = %v, want ErrInvalid", err)
	}
}

func testCapacityFailsClosed(t *testing.T, newStore Factory) {
	s := newStore(t, 3)
	ctx := context.Background()
	exs := make([]store.Execution, 3)
	for i := range exs {
		exs[i] = newExec("t")
		mustReserve(t, s, key(fmt.Sprintf("cap-%d", i)), "fp", exs[i], store.Reserved)
	}
	mustComplete(t, s, key("cap-0"), "fp", completed(exs[0].ID, `0`))

	_, err := s.Reserve(ctx, key("cap-new"), "fp", newExec("t"))
	wantErr(t, "reserve when full", err, store.ErrCapacity)
	if _, err := s.Lookup(ctx, key("cap-new")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused reservation left a record: %v", err)
	}
	// A full store still answers for the identities it holds, and evicts none.
	mustReserve(t, s, key("cap-0"), "fp", newExec("t"), store.Replay)
	mustReserve(t, s, key("cap-1"), "fp", newExec("t"), store.Uncertain)
	mustReserve(t, s, key("cap-2"), "other", newExec("t"), store.Conflict)
	st, err := s.Stats(ctx)
	if err != nil || st.Entries != 3 || st.Capacity != 3 {
		t.Fatalf("Stats = %+v, %v; want 3 of 3", st, err)
	}
	// Releasing one frees room for one.
	if _, err := s.MarkInterrupted(ctx, "node-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, exs[1].ID, false); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mustReserve(t, s, key("cap-new"), "fp", newExec("t"), store.Reserved)
}

// testPrincipalQuota checks Execution.Quota: a principal at its quota
// cannot reserve a new identity (a *store.QuotaError naming it, matching
// ErrCapacity), still gets its held identities answered, does not affect
// other principals, and gets room back when one of its records goes.
func testPrincipalQuota(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	withQuota := func(n int) store.Execution {
		ex := newExec("t")
		ex.Quota = n
		return ex
	}
	exs := []store.Execution{withQuota(2), withQuota(2)}
	mustReserve(t, s, key("quota-0"), "fp", exs[0], store.Reserved)
	mustReserve(t, s, key("quota-1"), "fp", exs[1], store.Reserved)
	mustComplete(t, s, key("quota-0"), "fp", completed(exs[0].ID, `0`))

	_, err := s.Reserve(ctx, key("quota-new"), "fp", withQuota(2))
	wantErr(t, "reserve at the quota", err, store.ErrCapacity)
	var qe *store.QuotaError
	if !errors.As(err, &qe) || qe.Principal != "alice" || qe.Quota != 2 {
		t.Fatalf("reserve at the quota: err = %#v, want a *store.QuotaError of alice at 2", err)
	}
	if code := store.CodeOf(err); code != "IDEMPOTENCY_CAPACITY" {
		t.Fatalf("reserve at the quota: code %q, want IDEMPOTENCY_CAPACITY", code)
	}
	if _, err := s.Lookup(ctx, key("quota-new")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused reservation left a record: %v", err)
	}
	// The identities alice holds are answered as ever.
	mustReserve(t, s, key("quota-0"), "fp", withQuota(2), store.Replay)
	mustReserve(t, s, key("quota-1"), "fp", withQuota(2), store.Uncertain)
	mustReserve(t, s, key("quota-0"), "other", withQuota(2), store.Conflict)
	// Another principal under the same quota is not affected.
	bob := store.Key{Principal: "bob", Session: "s1", RequestID: "quota-0"}
	mustReserve(t, s, bob, "fp", withQuota(2), store.Reserved)
	st, err := s.Stats(ctx)
	if err != nil || st.Entries != 3 {
		t.Fatalf("Stats = %+v, %v; want 3 entries", st, err)
	}
	// Releasing one of alice's records frees room for one.
	if _, err := s.Release(ctx, exs[1].ID, true); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mustReserve(t, s, key("quota-new"), "fp", withQuota(2), store.Reserved)
	_, err = s.Reserve(ctx, key("quota-newer"), "fp", withQuota(2))
	wantErr(t, "reserve at the quota again", err, store.ErrCapacity)
	// Without a quota alice is bound by the store's capacity alone.
	mustReserve(t, s, key("quota-newer"), "fp", withQuota(0), store.Reserved)
}

func testCancel(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	k := key("x1")
	ex := newExec("t")
	mustReserve(t, s, k, "fp", ex, store.Reserved)
	rec, err := s.Cancel(ctx, ex.ID, failedWith(ex.ID, store.StatusCancelled, "CANCELLED"))
	if err != nil || rec.Status != store.StatusCancelled {
		t.Fatalf("Cancel = %+v, %v", rec, err)
	}
	// Whatever the tool returns afterwards is discarded.
	_, err = s.Complete(ctx, k, "fp", completed(ex.ID, `1`))
	wantState(t, "complete after cancel", err, store.StatusCancelled)
	mustReserve(t, s, k, "fp", newExec("t"), store.Replay)

	_, err = s.Cancel(ctx, ex.ID, failedWith(ex.ID, store.StatusCancelled, "CANCELLED"))
	wantState(t, "cancel of a cancelled execution", err, store.StatusCancelled)

	ex2 := newExec("t")
	mustReserve(t, s, key("x2"), "fp", ex2, store.Reserved)
	if _, err := s.MarkInterrupted(ctx, ex2.NodeID); err != nil {
		t.Fatal(err)
	}
	_, err = s.Cancel(ctx, ex2.ID, failedWith(ex2.ID, store.StatusCancelled, "CANCELLED"))
	wantState(t, "cancel of an interrupted execution", err, store.StatusInterrupted)
	_, err = s.Cancel(ctx, "exec_missing", failedWith("exec_missing", store.StatusCancelled, "CANCELLED"))
	wantErr(t, "cancel of an unknown execution", err, store.ErrNotFound)
}

func testResolve(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	k := key("v1")
	ex := newExec("t")
	mustReserve(t, s, k, "fp", ex, store.Reserved)
	res := store.Resolution{Result: completed(ex.ID, `{"ok":true}`), By: store.ResolvedByProbe}
	_, err := s.Resolve(ctx, ex.ID, res)
	wantState(t, "resolve of a running execution", err, store.StatusRunning)

	if _, err := s.MarkInterrupted(ctx, ex.NodeID); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Resolve(ctx, ex.ID, res)
	if err != nil || rec.Status != store.StatusCompleted || !rec.Resolved || rec.ResolvedBy != store.ResolvedByProbe || string(rec.Data) != `{"ok":true}` {
		t.Fatalf("Resolve = %+v, %v", rec, err)
	}
	again := mustReserve(t, s, k, "fp", newExec("t"), store.Replay)
	if !again.Resolved || again.ResolvedBy != store.ResolvedByProbe || again.ExecutionID != ex.ID {
		t.Fatalf("replay after resolve = %+v", again)
	}
	if got, err := s.Get(ctx, ex.ID); err != nil || got.ResolvedBy != store.ResolvedByProbe {
		t.Fatalf("Get after resolve = %+v, %v; want resolved by %q", got, err, store.ResolvedByProbe)
	}
	_, err = s.Resolve(ctx, "exec_none", store.Resolution{Result: completed("exec_none", `1`), By: strings.Repeat("x", store.MaxResolvedBy+1)})
	wantErr(t, "resolved by a name over the bound", err, store.ErrInvalid)
	_, err = s.Resolve(ctx, ex.ID, res)
	wantState(t, "resolve of a finished execution", err, store.StatusCompleted)
	// The runner's late result no longer applies.
	_, err = s.Complete(ctx, k, "fp", completed(ex.ID, `2`))
	wantState(t, "complete after resolve", err, store.StatusCompleted)

	// A running execution whose runner is known gone may be resolved.
	ex2 := newExec("t")
	mustReserve(t, s, key("v2"), "fp", ex2, store.Reserved)
	rec, err = s.Resolve(ctx, ex2.ID, store.Resolution{Result: failedWith(ex2.ID, store.StatusFailed, "GONE"), AllowRunning: true})
	if err != nil || rec.Status != store.StatusFailed || !rec.Resolved || rec.ResolvedBy != "" {
		t.Fatalf("Resolve(AllowRunning) = %+v, %v", rec, err)
	}
	// Only completed and failed are outcomes a caller can establish.
	ex3 := newExec("t")
	mustReserve(t, s, key("v3"), "fp", ex3, store.Reserved)
	_, err = s.Resolve(ctx, ex3.ID, store.Resolution{Result: failedWith(ex3.ID, store.StatusTimedOut, "TIMEOUT"), AllowRunning: true})
	wantErr(t, "resolve to timed_out", err, store.ErrInvalid)
	_, err = s.Resolve(ctx, "exec_missing", store.Resolution{Result: completed("exec_missing", `1`)})
	wantErr(t, "resolve of an unknown execution", err, store.ErrNotFound)
}

func testRelease(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	k := key("l1")
	ex := newExec("t")
	mustReserve(t, s, k, "fp", ex, store.Reserved)
	_, err := s.Release(ctx, ex.ID, false)
	wantState(t, "release of a running execution", err, store.StatusRunning)

	if _, err := s.MarkInterrupted(ctx, ex.NodeID); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Release(ctx, ex.ID, false)
	if err != nil || rec.ExecutionID != ex.ID {
		t.Fatalf("Release = %+v, %v", rec, err)
	}
	if _, err := s.Get(ctx, ex.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after release: %v, want ErrNotFound", err)
	}
	// The next call of the identity runs the tool, with a new execution.
	ex2 := newExec("t")
	if rec := mustReserve(t, s, k, "fp", ex2, store.Reserved); rec.ExecutionID != ex2.ID {
		t.Fatalf("reserve after release = %+v", rec)
	}
	// The released execution's late result is refused.
	_, err = s.Complete(ctx, k, "fp", completed(ex.ID, `1`))
	wantState(t, "complete by a released execution", err, store.StatusRunning)
	// A runner releasing its own never-started reservation.
	if _, err := s.Release(ctx, ex2.ID, true); err != nil {
		t.Fatalf("Release(allowRunning): %v", err)
	}
	mustComplete(t, s, k, "fp", completed(mustReserve(t, s, k, "fp", newExec("t"), store.Reserved).ExecutionID, `1`))
	_, err = s.Release(ctx, mustLookup(t, s, k).ExecutionID, true)
	wantState(t, "release of a finished execution", err, store.StatusCompleted)
}

func mustLookup(t *testing.T, s store.Store, k store.Key) store.Record {
	t.Helper()
	rec, err := s.Lookup(context.Background(), k)
	if err != nil {
		t.Fatalf("Lookup(%s): %v", k, err)
	}
	return rec
}

func testIdentitiesAreDistinct(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	keys := []store.Key{
		{Principal: "alice", Session: "", RequestID: "same"},
		{Principal: "alice", Session: "s2", RequestID: "same"},
		{Principal: "bob", Session: "", RequestID: "same"},
	}
	for _, k := range keys {
		mustReserve(t, s, k, "fp", newExec("t"), store.Reserved)
	}
}

func testGetAndLookup(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	ex := newExec("t")
	mustReserve(t, s, key("g1"), "fp", ex, store.Reserved)
	got, err := s.Get(ctx, ex.ID)
	if err != nil || got.Key != key("g1") {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if got := mustLookup(t, s, key("g1")); got.ExecutionID != ex.ID {
		t.Fatalf("Lookup = %+v", got)
	}
	_, err = s.Get(ctx, "exec_missing")
	wantErr(t, "Get of an unknown execution", err, store.ErrNotFound)
	_, err = s.Lookup(ctx, key("missing"))
	wantErr(t, "Lookup of an unknown identity", err, store.ErrNotFound)
}

func testListSession(t *testing.T, newStore Factory) {
	s := newStore(t, 20)
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		ex := newExec("t")
		mustReserve(t, s, key(fmt.Sprintf("list-%d", i)), "fp", ex, store.Reserved)
		ids = append(ids, ex.ID)
	}
	mustReserve(t, s, store.Key{Principal: "bob", Session: "s1", RequestID: "b"}, "fp", newExec("t"), store.Reserved)
	mustReserve(t, s, store.Key{Principal: "alice", Session: "s2", RequestID: "x"}, "fp", newExec("t"), store.Reserved)

	var got []string
	q := store.ListQuery{Principal: "alice", Session: "s1", Limit: 3}
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("listing does not end")
		}
		p, err := s.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Records) > 3 {
			t.Fatalf("page of %d records, limit 3", len(p.Records))
		}
		for _, r := range p.Records {
			got = append(got, r.ExecutionID)
		}
		if p.Next == 0 {
			break
		}
		q.Before = p.Next
	}
	if len(got) != len(ids) {
		t.Fatalf("listed %d records, want %d: %v", len(got), len(ids), got)
	}
	for i := range ids {
		if got[i] != ids[len(ids)-1-i] {
			t.Fatalf("listing not newest first: got %v, reserved %v", got, ids)
		}
	}
	all, err := s.List(ctx, store.ListQuery{AllPrincipals: true, Session: "s1"})
	if err != nil || len(all.Records) != 8 {
		t.Fatalf("List(all principals) = %d records, %v; want 8", len(all.Records), err)
	}
	none, err := s.List(ctx, store.ListQuery{Principal: "carol", Session: "s1"})
	if err != nil || len(none.Records) != 0 || none.Next != 0 {
		t.Fatalf("List(other principal) = %+v, %v", none, err)
	}
}

// testConcurrentReserve races many goroutines to reserve the same
// identities: exactly one wins each.
func testConcurrentReserve(t *testing.T, newStore Factory) {
	const (
		identities = 50
		goroutines = 1000
	)
	s := newStore(t, identities*2)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners = make(map[store.Key][]string)
		errs    []error
		start   = make(chan struct{})
	)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			k := key(fmt.Sprintf("race-%d", g%identities))
			ex := newExec("t")
			res, err := s.Reserve(context.Background(), k, "fp", ex)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case res.Outcome == store.Reserved:
				winners[k] = append(winners[k], ex.ID)
			case res.Outcome != store.Uncertain:
				errs = append(errs, fmt.Errorf("%s: outcome %v", k, res.Outcome))
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d reservations failed, first: %v", len(errs), errs[0])
	}
	if len(winners) != identities {
		t.Fatalf("%d identities reserved, want %d", len(winners), identities)
	}
	for k, w := range winners {
		if len(w) != 1 {
			t.Fatalf("%s reserved by %d executions: %v", k, len(w), w)
		}
		if rec := mustLookup(t, s, k); rec.ExecutionID != w[0] {
			t.Fatalf("%s holds %s, but %s won", k, rec.ExecutionID, w[0])
		}
	}
}

// testDedupeWindow checks Execution.DedupeWindow (docs/mcp.md#calls-without-a-request-id-dedupe_window): within the
// window a finished record replays and an open one is uncertain; from the
// window's end on a finished record with the same fingerprint is replaced
// by the new reservation (a new execution id and seq, the old record
// gone, the count unchanged, even when the store or the principal is
// full), never an open one, never a different fingerprint's; and an
// execution without a window never replaces.
func testDedupeWindow(t *testing.T, newStore Factory) {
	s := newStore(t, 2)
	ctx := context.Background()
	const window = 10 * time.Minute
	at := func(d time.Duration) store.Execution {
		ex := newExec("t")
		ex.StartedAt = epoch.Add(d)
		ex.DedupeWindow = window
		ex.Quota = 2
		return ex
	}
	k := key("~0123456789abcdef0123456789abcdef")
	first := at(0)
	mustReserve(t, s, k, "fp", first, store.Reserved)
	// Open: uncertain, even past the window.
	mustReserve(t, s, k, "fp", at(window+time.Minute), store.Uncertain)
	mustComplete(t, s, k, "fp", completed(first.ID, `1`))
	// Within the window: the replay.
	if rec := mustReserve(t, s, k, "fp", at(window-time.Millisecond), store.Replay); rec.ExecutionID != first.ID {
		t.Fatalf("replay of %s, want %s", rec.ExecutionID, first.ID)
	}
	// Another fingerprint: a conflict, whatever the time.
	mustReserve(t, s, k, "other", at(2*window), store.Conflict)
	// Without a window: the replay, whatever the time.
	plain := newExec("t")
	plain.StartedAt = epoch.Add(time.Hour)
	mustReserve(t, s, k, "fp", plain, store.Replay)
	// Fill the store (and the principal's quota of 2).
	mustReserve(t, s, key("other"), "fp", newExec("t"), store.Reserved)

	// At the window's end: replaced, though the store is full.
	second := at(window)
	rec := mustReserve(t, s, k, "fp", second, store.Reserved)
	if rec.ExecutionID != second.ID || rec.Status != store.StatusRunning || !rec.StartedAt.Equal(second.StartedAt) {
		t.Fatalf("the replacement: %+v", rec)
	}
	if _, err := s.Get(ctx, first.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the replaced record is still there: %v", err)
	}
	if got := mustLookup(t, s, k); got.ExecutionID != second.ID {
		t.Fatalf("Lookup after the replacement: %+v", got)
	}
	if st, err := s.Stats(ctx); err != nil || st.Entries != 2 {
		t.Fatalf("Stats = %+v, %v; want 2 entries", st, err)
	}
	// The new record is an ordinary one: completed, replayed, and
	// replaced again only a window after its own start.
	mustComplete(t, s, k, "fp", completed(second.ID, `2`))
	mustReserve(t, s, k, "fp", at(2*window-time.Millisecond), store.Replay)
	third := at(2 * window)
	mustReserve(t, s, k, "fp", third, store.Reserved)
	if _, err := s.Complete(ctx, k, "fp", completed(second.ID, `2`)); err == nil {
		t.Fatal("a replaced execution's completion was accepted")
	}
	mustComplete(t, s, k, "fp", completed(third.ID, `3`))
}

// testRetryUncertain checks Execution.RetryUncertain (docs/policy.md): a
// timed_out or an interrupted record of the same fingerprint is replaced
// by the new reservation (a new execution id and a larger seq, the old
// record gone, the count unchanged, even when the store is full), whose
// outcome is then recorded and replayed; a running, completed, failed or
// cancelled record is answered as ever; a different fingerprint is a
// conflict; and an execution without the flag never replaces.
func testRetryUncertain(t *testing.T, newStore Factory) {
	s := newStore(t, 3)
	ctx := context.Background()
	retry := func() store.Execution {
		ex := newExec("t")
		ex.RetryUncertain = true
		return ex
	}
	timedOut := func(id string) store.Result {
		return store.Result{ExecutionID: id, Status: store.StatusTimedOut,
			Error: json.RawMessage(`{"code":"TIMEOUT","message":"m"}`), FinishedAt: epoch.Add(time.Hour)}
	}
	settle := func(k store.Key, open store.Record, res store.Result) {
		t.Helper()
		mustComplete(t, s, k, "fp", res)
		mustReserve(t, s, k, "other", retry(), store.Conflict)
		plain := newExec("t")
		if res.Status == store.StatusInterrupted {
			mustReserve(t, s, k, "fp", plain, store.Uncertain)
		} else {
			mustReserve(t, s, k, "fp", plain, store.Replay)
		}
		again := retry()
		rec := mustReserve(t, s, k, "fp", again, store.Reserved)
		if rec.ExecutionID != again.ID || rec.Status != store.StatusRunning || rec.Seq <= open.Seq {
			t.Fatalf("%s: the retry's reservation = %+v (the old one's seq %d)", res.Status, rec, open.Seq)
		}
		if _, err := s.Get(ctx, open.ExecutionID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s: the replaced record is still there: %v", res.Status, err)
		}
		// The old runner's late outcome is refused; the new one's recorded.
		if _, err := s.Complete(ctx, k, "fp", completed(open.ExecutionID, `0`)); err == nil {
			t.Fatalf("%s: the replaced execution's completion was accepted", res.Status)
		}
		mustComplete(t, s, k, "fp", completed(again.ID, `2`))
		if rec := mustReserve(t, s, k, "fp", retry(), store.Replay); rec.ExecutionID != again.ID {
			t.Fatalf("%s: after the retry, replay of %s, want %s", res.Status, rec.ExecutionID, again.ID)
		}
	}

	// Running: uncertain, flag or not.
	k1 := key("to")
	first := mustReserve(t, s, k1, "fp", retry(), store.Reserved)
	mustReserve(t, s, k1, "fp", retry(), store.Uncertain)
	k2 := key("lost")
	second := mustReserve(t, s, k2, "fp", newExec("t"), store.Reserved)
	k3 := key("done")
	third := mustReserve(t, s, k3, "fp", newExec("t"), store.Reserved)
	// The store is full: the replacements below take no new room.
	settle(k1, first, timedOut(first.ExecutionID))
	settle(k2, second, store.Result{ExecutionID: second.ExecutionID, Status: store.StatusInterrupted})
	// Finished otherwise: replayed, never run again.
	mustComplete(t, s, k3, "fp", store.Result{ExecutionID: third.ExecutionID, Status: store.StatusFailed,
		Error: json.RawMessage(`{"code":"X","message":"m"}`), FinishedAt: epoch.Add(time.Hour)})
	if rec := mustReserve(t, s, k3, "fp", retry(), store.Replay); rec.ExecutionID != third.ExecutionID {
		t.Fatalf("a failed record was not replayed: %+v", rec)
	}
	if st, err := s.Stats(ctx); err != nil || st.Entries != 3 {
		t.Fatalf("Stats = %+v, %v; want 3 entries", st, err)
	}
}

// testDedupeWindowRefused: a replacement past the window that the bounds
// refuse leaves the old record in place — answered, counted, its bytes
// kept — whatever the refusal: the principal's bytes, or an execution id
// already in use.
func testDedupeWindowRefused(t *testing.T, newStore Factory) {
	s := newStore(t, 10)
	ctx := context.Background()
	const window = time.Minute
	k := key("~fedcba9876543210fedcba9876543210")
	first := newExec("t")
	first.StartedAt, first.DedupeWindow = epoch, window
	mustReserve(t, s, k, "fp", first, store.Reserved)
	mustComplete(t, s, k, "fp", completed(first.ID, `"done"`))
	other := newExec("t")
	mustReserve(t, s, key("other"), "fp", other, store.Reserved)
	before, err := s.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(what string) {
		t.Helper()
		if got := mustLookup(t, s, k); got.ExecutionID != first.ID || got.Status != store.StatusCompleted {
			t.Fatalf("after %s: Lookup = %+v, want %s completed", what, got, first.ID)
		}
		if st, err := s.Stats(ctx); err != nil || st.Entries != before.Entries || (before.Bytes != 0 && st.Bytes != before.Bytes) {
			t.Fatalf("after %s: Stats = %+v, %v; want %+v", what, st, err, before)
		}
	}

	// Past the window, but the new record and room for its result do not
	// fit in the principal's bytes, even with the old record's given back.
	tight := newExec("t")
	tight.StartedAt, tight.DedupeWindow = epoch.Add(window), window
	tight.ByteQuota, tight.Headroom = 1000, 100_000
	_, err = s.Reserve(ctx, k, "fp", tight)
	var qe *store.QuotaError
	if !errors.As(err, &qe) || qe.Bytes == 0 || !errors.Is(err, store.ErrCapacity) {
		t.Fatalf("a replacement over the byte quota: %v, want a *QuotaError on bytes", err)
	}
	unchanged("a replacement refused for bytes")

	// Past the window, under an execution id another record holds.
	dup := newExec("t")
	dup.ID, dup.StartedAt, dup.DedupeWindow = other.ID, epoch.Add(window), window
	if _, err := s.Reserve(ctx, k, "fp", dup); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a replacement under an execution id in use: %v, want ErrInvalid", err)
	}
	unchanged("a replacement under a used execution id")
}
