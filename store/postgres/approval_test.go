package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
	"github.com/carmyhq/carmy/store/postgres"
	"github.com/carmyhq/carmy/store/storetest"
	"github.com/carmyhq/carmy/tests/testutil"
)

// TestApprovalConformance runs the approval gates' conformance cases on a
// Store, each case in a schema of its own.
func TestApprovalConformance(t *testing.T) {
	t.Parallel()
	needServer(t)
	storetest.RunApproval(t, func(t *testing.T, capacity int) store.Store {
		return newStore(t, postgres.Config{Capacity: capacity})
	})
}

// TestApprovalConformanceFleet runs them on a Fleet node, ready.
func TestApprovalConformanceFleet(t *testing.T) {
	t.Parallel()
	srv := needServer(t)
	storetest.RunApproval(t, func(t *testing.T, capacity int) store.Store {
		f, _ := startFleet(t, srv.DSN("postgres")+" pool_max_conns=8", freshSchema(), "node-f", 10*time.Second)
		testutil.WaitUntil(t, 30*time.Second, "fleet ready", func() bool { return f.Ready(context.Background()) == nil })
		return f
	})
}

// gatedExec is an execution gated until an hour from now.
func gatedExec(id string) store.Execution {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return store.Execution{ID: id, Tool: "pay", NodeID: "node-a", StartedAt: now,
		Approval: &store.ApprovalGate{Approvers: []string{"bob"}, ExpiresAt: now.Add(time.Hour),
			Arguments: json.RawMessage(`{"amount": 5}`), Metadata: json.RawMessage(`{"ticket":"T-1"}`)}}
}

// TestApprovalTwoFleets: 50 approvals of one gated record, half through
// each of two fleet nodes on one database, at once: one wins (running on
// its node, with a seq above every seq given before), the 49 others are
// told the running record; the gate's arguments are kept byte for byte
// and counted in the bytes, which match the records' after the approval.
func TestApprovalTwoFleets(t *testing.T) {
	t.Parallel()
	srv := needServer(t)
	dsn, schema := srv.DSN("postgres")+" pool_max_conns=8", freshSchema()
	fa, _ := startFleet(t, dsn, schema, "node-a", 10*time.Second)
	fb, _ := startFleet(t, dsn, schema, "node-b", 10*time.Second)
	ctx := context.Background()
	for _, f := range []*postgres.Fleet{fa, fb} {
		testutil.WaitUntil(t, 30*time.Second, "fleet ready", func() bool { return f.Ready(ctx) == nil })
	}
	k := store.Key{Principal: "alice", Session: "s", RequestID: "pay-1"}
	ex := gatedExec("exec_gated_1")
	res, err := fa.Reserve(ctx, k, "fp", ex)
	if err != nil || res.Outcome != store.Reserved || res.Record.Status != store.StatusAwaitingApproval {
		t.Fatalf("gated reserve: %+v %v", res, err)
	}
	// A later ordinary reservation takes a seq above the gated one's.
	other := reserveOn(t, fb, "node-b", "later")
	got, err := fb.Get(ctx, ex.ID)
	if err != nil || string(got.Approval.Arguments) != `{"amount": 5}` || string(got.Approval.Metadata) != `{"ticket":"T-1"}` {
		t.Fatalf("the gate as read through the other node: %+v %v", got.Approval, err)
	}
	st, err := fa.Stats(ctx)
	if want := store.RecordSize(got) + store.RecordSize(other); err != nil || st.Bytes != want {
		t.Fatalf("bytes %d (%v), want %d", st.Bytes, err, want)
	}

	const n = 50
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []store.Record
		lost int
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, node := fa, "node-a"
			if i%2 == 1 {
				f, node = fb, "node-b"
			}
			rec, err := f.Decide(ctx, ex.ID, store.Decision{Kind: store.DecisionApprove, Actor: "bob", At: time.Now(), NodeID: node})
			mu.Lock()
			defer mu.Unlock()
			var se *store.StateError
			switch {
			case err == nil:
				wins = append(wins, rec)
			case errors.As(err, &se) && se.Record.ExecutionID == ex.ID && se.Record.Status == store.StatusRunning:
				lost++
			default:
				t.Errorf("approve on %s: %+v %v", node, rec, err)
			}
		}()
	}
	wg.Wait()
	if len(wins) != 1 || lost != n-1 {
		t.Fatalf("%d approvals won, %d told running; want 1 and %d", len(wins), lost, n-1)
	}
	won := wins[0]
	if won.Status != store.StatusRunning || won.Seq <= other.Seq || won.Decision == nil || won.Decision.By != "bob" {
		t.Fatalf("approved record %+v (decision %+v), the later reservation's seq %d", won, won.Decision, other.Seq)
	}
	after, err := fa.Get(ctx, ex.ID)
	if err != nil || after.Seq != won.Seq || after.NodeID != won.NodeID {
		t.Fatalf("read after: %+v %v", after, err)
	}
	st, err = fb.Stats(ctx)
	if want := store.RecordSize(after) + store.RecordSize(other); err != nil || st.Bytes != want {
		t.Fatalf("bytes after the approval %d (%v), want %d", st.Bytes, err, want)
	}
}

// TestApprovalLedger: a gated reservation, an approval, a denial and an
// expiry append reserved (awaiting_approval), approved, denied and expired
// entries, by the decider (an expiry with no actor: the store's node), and
// the chain verifies.
func TestApprovalLedger(t *testing.T) {
	t.Parallel()
	needServer(t)
	s := newStore(t, postgres.Config{NodeID: "n9"})
	ctx := context.Background()
	var ids []string
	for i, kind := range []store.DecisionKind{store.DecisionApprove, store.DecisionDeny, store.DecisionExpire} {
		ex := gatedExec("exec_l" + string(rune('a'+i)))
		k := store.Key{Principal: "alice", Session: "s", RequestID: ex.ID}
		if res, err := s.Reserve(ctx, k, "fp", ex); err != nil || res.Outcome != store.Reserved {
			t.Fatalf("reserve: %+v %v", res, err)
		}
		d := store.Decision{Kind: kind, Actor: "bob", Reason: "checked", At: time.Now(), NodeID: "n9"}
		if kind == store.DecisionExpire {
			d.Actor, d.At = "", ex.Approval.ExpiresAt
		}
		if _, err := s.Decide(ctx, ex.ID, d); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		ids = append(ids, ex.ID)
	}
	export := exportAll(t, s)
	if _, err := audit.Verify(bytes.NewReader(export)); err != nil {
		t.Fatal(err)
	}
	es := entries(t, export)
	want := []struct {
		kind          audit.Kind
		id, actor, st string
	}{
		{audit.KindReserved, ids[0], "alice", "awaiting_approval"}, {audit.KindApproved, ids[0], "bob", "running"},
		{audit.KindReserved, ids[1], "alice", "awaiting_approval"}, {audit.KindDenied, ids[1], "bob", "denied"},
		{audit.KindReserved, ids[2], "alice", "awaiting_approval"}, {audit.KindExpired, ids[2], "n9", "expired"},
	}
	if len(es) != len(want) {
		t.Fatalf("%d entries, want %d: %+v", len(es), len(want), es)
	}
	for i, w := range want {
		e := es[i]
		if e.Kind != w.kind || e.ExecutionID != w.id || e.Actor != w.actor || e.Status != w.st || e.Principal != "alice" || e.Tool != "pay" {
			t.Fatalf("entry %d = %+v, want %+v", i, e, w)
		}
	}
}

// TestMigrateToApproval opens tables at version 7 (made by a build before
// approval gates, here by undoing version 8) that hold a finished record:
// version 8 upgrades them in place, the record and the bytes unchanged,
// and a gated call is then reserved, retried (with its gate and without),
// denied and replayed.
func TestMigrateToApproval(t *testing.T) {
	t.Parallel()
	srv := needServer(t)
	ctx := context.Background()
	cfg := postgres.Config{Schema: freshSchema(), Logger: quiet, NodeID: "n1"}
	s := openStore(t, srv.DSN("postgres"), cfg)
	old := reserveOn(t, s, "n1", "before")
	if _, err := s.Complete(ctx, old.Key, old.Fingerprint, completedResult(old.ExecutionID, `{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	admin := adminPool(t, srv)
	rec := table(s, "records")
	for _, sql := range []string{
		"ALTER TABLE " + rec + " DROP COLUMN approvers, DROP COLUMN expires_at, DROP COLUMN arguments, DROP COLUMN metadata, " +
			"DROP COLUMN decision_status, DROP COLUMN decided_by, DROP COLUMN decided_reason, DROP COLUMN decided_at",
		"ALTER TABLE " + rec + " DROP CONSTRAINT " + postgres.DefaultTablePrefix + "rec_status",
		"ALTER TABLE " + rec + " ADD CONSTRAINT " + postgres.DefaultTablePrefix + "rec_status CHECK (status IN ('running', 'interrupted', 'completed', 'failed', 'timed_out', 'cancelled'))",
		"DELETE FROM " + table(s, "schema_version") + " WHERE version >= 8",
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	again := openStore(t, srv.DSN("postgres"), cfg)
	got, err := again.Lookup(ctx, old.Key)
	if err != nil || got.Status != store.StatusCompleted || got.Approval != nil || got.Decision != nil {
		t.Fatalf("the old record after the migration: %+v %v", got, err)
	}
	if st, err := again.Stats(ctx); err != nil || st.Bytes != store.RecordSize(got) {
		t.Fatalf("bytes after the migration %+v %v, want %d", st, err, store.RecordSize(got))
	}
	ex := gatedExec("exec_mig_gated")
	k := store.Key{Principal: "alice", Session: "s", RequestID: "gated"}
	if res, err := again.Reserve(ctx, k, "fp", ex); err != nil || res.Outcome != store.Reserved {
		t.Fatalf("gated reserve after the migration: %+v %v", res, err)
	}
	if res, err := again.Reserve(ctx, k, "fp", gatedExec("exec_mig_retry")); err != nil || res.Outcome != store.Awaiting {
		t.Fatalf("retry: %+v %v", res, err)
	}
	// A retry with no gate (the tool's approval since removed) goes
	// through a round: it awaits as well, and the record keeps its gate.
	if res, err := again.Reserve(ctx, k, "fp", newExecution("ungated")); err != nil || res.Outcome != store.Awaiting ||
		res.Record.Approval == nil || string(res.Record.Approval.Arguments) != `{"amount": 5}` {
		t.Fatalf("ungated retry: %+v %v", res, err)
	}
	if _, err := again.Decide(ctx, ex.ID, store.Decision{Kind: store.DecisionDeny, Actor: "bob", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	res, err := again.Reserve(ctx, k, "fp", gatedExec("exec_mig_after"))
	if err != nil || res.Outcome != store.Replay || res.Record.Status != store.StatusDenied {
		t.Fatalf("after the denial: %+v %v", res, err)
	}
	var want int64
	for _, key := range []store.Key{old.Key, k} {
		r, err := again.Lookup(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		want += store.RecordSize(r)
	}
	if st, err := again.Stats(ctx); err != nil || st.Bytes != want || st.Entries != 2 {
		t.Fatalf("Stats = %+v %v, want %d bytes in 2 entries", st, err, want)
	}
}

// TestApprovalSurvivesSweep: fleet node a stops beating holding a gated
// record (reserved on a, awaiting approval) and a running one: b's sweep
// marks the running one interrupted and leaves the gated one awaiting;
// approved through b, it runs on b, whose seq is the newest.
func TestApprovalSurvivesSweep(t *testing.T) {
	t.Parallel()
	srv := needServer(t)
	dsn, schema := srv.DSN("postgres"), freshSchema()
	a, stopA := startFleet(t, dsn, schema, "node-a", time.Second)
	b, _ := startFleet(t, dsn, schema, "node-b", time.Second)
	ctx := context.Background()
	for _, f := range []*postgres.Fleet{a, b} {
		testutil.WaitUntil(t, 30*time.Second, "fleet ready", func() bool { return f.Ready(ctx) == nil })
	}
	ex := gatedExec("exec_sweep_gated")
	if res, err := a.Reserve(ctx, store.Key{Principal: "alice", RequestID: "gated"}, "fp", ex); err != nil || res.Outcome != store.Reserved {
		t.Fatalf("gated reserve: %+v %v", res, err)
	}
	orphan := reserveOn(t, a, "node-a", "orphan")
	stopA()
	testutil.WaitUntil(t, 20*time.Second, "a's running execution interrupted", func() bool {
		r, err := b.Get(ctx, orphan.ExecutionID)
		return err == nil && r.Status == store.StatusInterrupted
	})
	got, err := b.Get(ctx, ex.ID)
	if err != nil || got.Status != store.StatusAwaitingApproval || got.NodeID != "node-a" {
		t.Fatalf("the gated record after the sweep: %+v %v", got, err)
	}
	rec, err := b.Decide(ctx, ex.ID, store.Decision{Kind: store.DecisionApprove, Actor: "bob", At: time.Now(), NodeID: "node-b"})
	if err != nil || rec.Status != store.StatusRunning || rec.NodeID != "node-b" || rec.Seq <= orphan.Seq {
		t.Fatalf("approve on b: %+v %v", rec, err)
	}
}

// TestDecideCommitReplyLost loses the answer to the COMMIT of an
// approval, which committed: Decide reports the outcome unknown (never a
// refusal), the record is running on the approving node, and a retry of
// the approval is refused with it (a *store.StateError), so the caller
// that lost the answer learns that its decision stands and runs nothing
// twice.
func TestDecideCommitReplyLost(t *testing.T) {
	t.Parallel()
	s, p := proxied(t)
	ctx := context.Background()
	ex := gatedExec("exec_lost_decide")
	mustReserve(t, s, key("lost-decide"), "fp", ex, store.Reserved)
	d := store.Decision{Kind: store.DecisionApprove, Actor: "bob", At: time.Now(), NodeID: "node-b"}
	p.DropReplyTo([]byte("commit\x00"))
	_, err := s.Decide(ctx, ex.ID, d)
	wantDropped(t, p)
	if !errors.Is(err, store.ErrCommitUnknown) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Decide whose COMMIT answer was lost: %v; want ErrCommitUnknown alone", err)
	}
	_, err = s.Decide(ctx, ex.ID, d)
	var se *store.StateError
	if !errors.As(err, &se) || se.Record.Status != store.StatusRunning || se.Record.NodeID != "node-b" || se.Record.Decision == nil {
		t.Fatalf("retry of the approval: %v; want a StateError with the running record", err)
	}
}
