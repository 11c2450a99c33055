package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/postgres"
)

var (
	t0      = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	execSeq atomic.Int64
)

// newExecution returns an execution of node-a with a fresh id.
func newExecution(name string) store.Execution {
	return store.Execution{
		ID:        fmt.Sprintf("exec_pg_%s_%d", name, execSeq.Add(1)),
		Tool:      "t",
		NodeID:    "node-a",
		StartedAt: t0,
	}
}

func completedResult(id, data string) store.Result {
	return store.Result{ExecutionID: id, Status: store.StatusCompleted, Data: json.RawMessage(data), FinishedAt: t0.Add(time.Minute)}
}

func mustReserve(t *testing.T, s store.Store, k store.Key, fp string, ex store.Execution, want store.Outcome) store.Record {
	t.Helper()
	res, err := s.Reserve(context.Background(), k, fp, ex)
	if err != nil || res.Outcome != want {
		t.Fatalf("Reserve(%s) = %v, %v; want %v", k, res.Outcome, err, want)
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

func key(req string) store.Key { return store.Key{Principal: "alice", Session: "s", RequestID: req} }

// TestResultsReplayedByteForByte checks that data and error come back as
// they were recorded, white space, key order and number spelling
// included, and that a failed result's absent data stays absent.
func TestResultsReplayedByteForByte(t *testing.T) {
	t.Parallel()
	s := newStore(t, postgres.Config{})
	ctx := context.Background()
	data := "{ \"z\" : 1.0,\n\t\"a\": [1e3, \"\\u00e9\", \"é\", null] }"
	ex := newExecution("bytes")
	mustReserve(t, s, key("b1"), "fp", ex, store.Reserved)
	done := mustComplete(t, s, key("b1"), "fp", completedResult(ex.ID, data))
	replay := mustReserve(t, s, key("b1"), "fp", newExecution("bytes"), store.Replay)
	got, err := s.Get(ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	for what, rec := range map[string]store.Record{"Complete": done, "replay": replay, "Get": got} {
		if string(rec.Data) != data || rec.Error != nil {
			t.Fatalf("%s: data %q, error %q; want %q and none", what, rec.Data, rec.Error, data)
		}
	}

	errBody := `{"message":"m",  "code":"TOOL_ERROR"}`
	ex2 := newExecution("bytes")
	mustReserve(t, s, key("b2"), "fp", ex2, store.Reserved)
	mustComplete(t, s, key("b2"), "fp", store.Result{ExecutionID: ex2.ID, Status: store.StatusFailed,
		Error: json.RawMessage(errBody), FinishedAt: t0})
	rec, err := s.Lookup(ctx, key("b2"))
	if err != nil || rec.Data != nil || string(rec.Error) != errBody {
		t.Fatalf("failed record: data %q, error %q, %v; want none and %q", rec.Data, rec.Error, err, errBody)
	}
}

// TestTimesToTheMicrosecond checks that times come back in UTC, to the
// microsecond (PostgreSQL's precision), the same from every method.
func TestTimesToTheMicrosecond(t *testing.T) {
	t.Parallel()
	s := newStore(t, postgres.Config{})
	ctx := context.Background()
	ex := newExecution("time")
	ex.StartedAt = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("X", 3600))
	rec := mustReserve(t, s, key("time"), "fp", ex, store.Reserved)
	want := ex.StartedAt.Truncate(time.Microsecond)
	got, err := s.Lookup(ctx, key("time"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []store.Record{rec, got} {
		if !r.StartedAt.Equal(want) || r.StartedAt.Location() != time.UTC {
			t.Fatalf("StartedAt = %v, want %v in UTC", r.StartedAt, want)
		}
	}
}

// TestExpire checks retention: finished records older than the cutoff go,
// running, interrupted and newer ones stay, and the counters follow, so a
// principal at its quota gets room back.
func TestExpire(t *testing.T) {
	t.Parallel()
	s := newStore(t, postgres.Config{Capacity: 10})
	ctx := context.Background()
	finish := func(req string, at time.Time) {
		ex := newExecution("exp")
		ex.Quota = 4
		mustReserve(t, s, key(req), "fp", ex, store.Reserved)
		res := completedResult(ex.ID, `1`)
		res.FinishedAt = at
		mustComplete(t, s, key(req), "fp", res)
	}
	finish("old", t0)
	finish("new", t0.Add(time.Hour))
	mustReserve(t, s, key("running"), "fp", newExecution("exp"), store.Reserved)
	other := newExecution("exp")
	other.NodeID = "node-b"
	mustReserve(t, s, key("interrupted"), "fp", other, store.Reserved)
	if _, err := s.MarkInterrupted(ctx, "node-b"); err != nil {
		t.Fatal(err)
	}
	quota := newExecution("exp")
	quota.Quota = 4
	if _, err := s.Reserve(ctx, key("refused"), "fp", quota); !errors.As(err, new(*store.QuotaError)) {
		t.Fatalf("Reserve at the quota: %v, want a QuotaError", err)
	}

	n, err := s.Expire(ctx, t0.Add(time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("Expire = %d, %v; want 1", n, err)
	}
	if _, err := s.Lookup(ctx, key("old")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Lookup of the expired record: %v", err)
	}
	for _, req := range []string{"new", "running", "interrupted"} {
		if _, err := s.Lookup(ctx, key(req)); err != nil {
			t.Fatalf("Lookup(%s) after Expire: %v", req, err)
		}
	}
	if st, err := s.Stats(ctx); err != nil || st.Entries != 3 {
		t.Fatalf("Stats = %+v, %v; want 3 entries", st, err)
	}
	mustReserve(t, s, key("refused"), "fp", quota, store.Reserved)
	if n, err := s.Expire(ctx, t0.Add(time.Minute)); err != nil || n != 0 {
		t.Fatalf("Expire again = %d, %v; want 0", n, err)
	}
	wantCountsExact(t, readCounts(t, adminPool(t, needServer(t)), s))
}

// TestArgumentsPostgreSQLCannotStore checks that text PostgreSQL cannot
// hold (NUL, invalid UTF-8) is refused as invalid, or found absent, rather
// than sent to the server.
func TestArgumentsPostgreSQLCannotStore(t *testing.T) {
	t.Parallel()
	s := newStore(t, postgres.Config{})
	ctx := context.Background()
	for _, k := range []store.Key{
		{Principal: "a\x00b", RequestID: "r"},
		{Principal: "a", Session: "\xff", RequestID: "r"},
		{Principal: "a", RequestID: "r\x00"},
	} {
		if _, err := s.Reserve(ctx, k, "fp", newExecution("nul")); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Reserve(%q): %v, want ErrInvalid", k, err)
		}
		if _, err := s.Lookup(ctx, k); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Lookup(%q): %v, want ErrNotFound", k, err)
		}
		if _, err := s.Complete(ctx, k, "fp", completedResult("exec_x", `1`)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Complete(%q): %v, want ErrNotFound", k, err)
		}
	}
	if _, err := s.Get(ctx, "exec\x00"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get: %v, want ErrNotFound", err)
	}
	ex := newExecution("dup")
	mustReserve(t, s, key("dup-1"), "fp", ex, store.Reserved)
	if _, err := s.Reserve(ctx, key("dup-2"), "fp", ex); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Reserve with an execution id in use: %v, want ErrInvalid", err)
	}
	if st, _ := s.Stats(ctx); st.Entries != 1 {
		t.Fatalf("a refused reservation counted: %+v", st)
	}
}

// TestContextHonoured checks that a done context stops every method before
// it writes, as not applied.
func TestContextHonoured(t *testing.T) {
	t.Parallel()
	s := newStore(t, postgres.Config{})
	ex := newExecution("ctx")
	mustReserve(t, s, key("ctx"), "fp", ex, store.Reserved)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) || !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrCommitUnknown) {
			t.Fatalf("%s with a cancelled context: %v; want context.Canceled and ErrUnavailable", what, err)
		}
	}
	_, err := s.Reserve(ctx, key("ctx-2"), "fp", newExecution("ctx"))
	check("Reserve", err)
	_, err = s.Complete(ctx, key("ctx"), "fp", completedResult(ex.ID, `1`))
	check("Complete", err)
	_, err = s.Release(ctx, ex.ID, true)
	check("Release", err)
	_, err = s.MarkInterrupted(ctx, "node-a")
	check("MarkInterrupted", err)
	_, err = s.Expire(ctx, t0.Add(time.Hour))
	check("Expire", err)
	_, err = s.List(ctx, store.ListQuery{Principal: "alice", Session: "s"})
	check("List", err)
	if rec, err := s.Lookup(context.Background(), key("ctx")); err != nil || rec.Status != store.StatusRunning {
		t.Fatalf("after cancelled writes: %+v, %v; want it running", rec, err)
	}
	if _, err := s.Lookup(context.Background(), key("ctx-2")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a cancelled Reserve reserved: %v", err)
	}
}

// TestListPaging checks List across principals and its bounds.
func TestListPaging(t *testing.T) {
	t.Parallel()
	s := newStore(t, postgres.Config{Capacity: 1000})
	ctx := context.Background()
	for i := range store.MaxListLimit + 5 {
		k := store.Key{Principal: fmt.Sprintf("p%d", i%2), Session: "big", RequestID: fmt.Sprint(i)}
		mustReserve(t, s, k, "fp", newExecution("list"), store.Reserved)
	}
	p, err := s.List(ctx, store.ListQuery{AllPrincipals: true, Session: "big", Limit: 10 * store.MaxListLimit})
	if err != nil || len(p.Records) != store.MaxListLimit || p.Next == 0 {
		t.Fatalf("List over the limit: %d records, next %d, %v; want %d and more", len(p.Records), p.Next, err, store.MaxListLimit)
	}
	rest, err := s.List(ctx, store.ListQuery{AllPrincipals: true, Session: "big", Before: p.Next})
	if err != nil || len(rest.Records) != 5 || rest.Next != 0 {
		t.Fatalf("second page: %d records, next %d, %v; want 5 and the end", len(rest.Records), rest.Next, err)
	}
	all := append(p.Records, rest.Records...)
	for i := 1; i < len(all); i++ {
		if all[i].Seq >= all[i-1].Seq {
			t.Fatalf("not newest first at %d: %d after %d", i, all[i].Seq, all[i-1].Seq)
		}
	}
	def, err := s.List(ctx, store.ListQuery{Principal: "p1", Session: "big"})
	if err != nil || len(def.Records) != store.DefaultListLimit {
		t.Fatalf("default page: %d records, %v", len(def.Records), err)
	}
	for _, r := range def.Records {
		if r.Key.Principal != "p1" {
			t.Fatalf("List of p1 returned %s", r.Key)
		}
	}
}

// TestPrefixesAreIndependent checks two stores in one schema under two
// table prefixes, and a store on a pool the caller owns.
func TestPrefixesAreIndependent(t *testing.T) {
	t.Parallel()
	srv := needServer(t)
	schema := freshSchema()
	a := openStore(t, srv.DSN("postgres"), postgres.Config{Schema: schema, Capacity: 1})
	pool, err := pgxpool.New(context.Background(), srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	b, err := postgres.New(context.Background(), pool, postgres.Config{Schema: schema, TablePrefix: "other_", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	mustReserve(t, a, key("x"), "fp", newExecution("pfx"), store.Reserved)
	mustReserve(t, b, key("x"), "fp", newExecution("pfx"), store.Reserved)
	if st, _ := b.Stats(context.Background()); st.Entries != 1 || st.Capacity != store.DefaultCapacity {
		t.Fatalf("Stats of the second store = %+v, want 1 of the default capacity", st)
	}
	b.Close()
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatalf("Close closed a pool the caller owns: %v", err)
	}
}

// TestConfigValidate checks the settings Open refuses.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []postgres.Config{
		{Capacity: -1},
		{Schema: strings.Repeat("s", 64)},
		{TablePrefix: strings.Repeat("p", 50)},
		{Schema: "a\x00b"},
	} {
		if err := c.Validate(); err == nil {
			t.Fatalf("Validate(%+v) = nil", c)
		}
		if _, err := postgres.Open(context.Background(), "host=/nonexistent", c); err == nil {
			t.Fatalf("Open(%+v) = nil error", c)
		}
	}
	if err := (postgres.Config{TablePrefix: strings.Repeat("p", 49)}).Validate(); err != nil {
		t.Fatal(err)
	}
}
