package postgres_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
	"github.com/carmyhq/carmy/store/postgres"
)

// exportAll reads s's whole ledger through AuditExport, paging as carmy
// audit export does.
func exportAll(tb testing.TB, s *postgres.Store) []byte {
	tb.Helper()
	var out bytes.Buffer
	after := uint64(0)
	for {
		var page bytes.Buffer
		last, err := s.AuditExport(context.Background(), &page, after, 500)
		if err != nil {
			tb.Fatalf("AuditExport after %d: %v", after, err)
		}
		if after > 0 {
			// Every page after the first begins with its anchor's line.
			if _, rest, ok := bytes.Cut(page.Bytes(), []byte("\n")); ok {
				page = *bytes.NewBuffer(rest)
			}
		}
		out.Write(page.Bytes())
		if last == after {
			return out.Bytes()
		}
		after = last
	}
}

// entries parses an export's entry lines (not its checkpoint line).
func entries(tb testing.TB, export []byte) []audit.Entry {
	tb.Helper()
	var es []audit.Entry
	for line := range bytes.Lines(export) {
		var e audit.Entry
		if err := json.Unmarshal(line, &e); err != nil {
			tb.Fatalf("line %q: %v", line, err)
		}
		if e.Seq != 0 {
			es = append(es, e)
		}
	}
	return es
}

// TestLedgerConcurrentStores: two stores on one database (two fleet
// nodes) reserving, completing, cancelling and releasing at once write
// one chain: consecutive seqs from 1, verifying, one entry per decision,
// each execution's reservation before its outcome, the same head read by
// both.
func TestLedgerConcurrentStores(t *testing.T) {
	srv := needServer(t)
	schema := freshSchema()
	dsn := srv.DSN("postgres") + " pool_max_conns=8"
	a := openStore(t, dsn, postgres.Config{Schema: schema, NodeID: "n1"})
	b := openStore(t, dsn, postgres.Config{Schema: schema, NodeID: "n2"})
	ctx := context.Background()
	const callers, calls = 8, 15
	var wg sync.WaitGroup
	errs := make(chan error, 2*callers*calls)
	for i := range 2 * callers {
		s, node := a, "n1"
		if i%2 == 1 {
			s, node = b, "n2"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range calls {
				id := fmt.Sprintf("%s-%d-%d", node, i, j)
				key := store.Key{Principal: "alice", Session: "s", RequestID: id}
				exec := store.Execution{ID: "exec_" + id, Tool: "echo", NodeID: node, StartedAt: time.Now().UTC()}
				res, err := s.Reserve(ctx, key, "fp", exec)
				if err != nil || res.Outcome != store.Reserved {
					errs <- fmt.Errorf("reserve %s: %v %v", id, res.Outcome, err)
					return
				}
				switch j % 3 {
				case 0:
					_, err = s.Complete(ctx, key, "fp", store.Result{ExecutionID: exec.ID, Status: store.StatusCompleted, Data: []byte(`{}`), FinishedAt: time.Now().UTC()})
				case 1:
					_, err = s.Cancel(store.WithActor(ctx, "bob"), exec.ID, store.Result{ExecutionID: exec.ID, Status: store.StatusCancelled, Error: []byte(`{"code":"CANCELLED"}`), FinishedAt: time.Now().UTC()})
				case 2:
					_, err = s.Release(ctx, exec.ID, true)
				}
				if err != nil {
					errs <- fmt.Errorf("settle %s: %w", id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	export := exportAll(t, a)
	v, err := audit.Verify(bytes.NewReader(export))
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	want := 2 * callers * calls * 2
	if v.Entries != want || v.Head.Seq != uint64(want) {
		t.Fatalf("verified %d entries, head %d; want %d", v.Entries, v.Head.Seq, want)
	}
	for _, s := range []*postgres.Store{a, b} {
		h, err := s.AuditHead(ctx)
		if err != nil || h != v.Head {
			t.Fatalf("AuditHead %v %v, want the export's head %v", h, err, v.Head)
		}
	}
	seen := map[string]audit.Kind{}
	for i, e := range entries(t, export) {
		if e.Seq != uint64(i+1) {
			t.Fatalf("entry %d has seq %d", i+1, e.Seq)
		}
		prev, ok := seen[e.ExecutionID]
		switch {
		case e.Kind == audit.KindReserved && ok, e.Kind != audit.KindReserved && prev != audit.KindReserved:
			t.Fatalf("entry %d: %s of %s after %q", e.Seq, e.Kind, e.ExecutionID, prev)
		}
		seen[e.ExecutionID] = e.Kind
		wantActor := map[audit.Kind]string{audit.KindReserved: "alice", audit.KindCancelled: "bob",
			audit.KindCompleted: e.ExecutionID[5:7], audit.KindReleased: e.ExecutionID[5:7]}[e.Kind]
		if e.Actor != wantActor || e.Principal != "alice" || e.Tool != "echo" || e.Fingerprint != "fp" {
			t.Fatalf("entry %d: %+v; want actor %q", e.Seq, e, wantActor)
		}
	}
}

// TestLedgerTamperedRow: a row changed in the database makes the
// verifier name its seq.
func TestLedgerTamperedRow(t *testing.T) {
	srv := needServer(t)
	s := newStore(t, postgres.Config{NodeID: "n1"})
	for i := range 5 {
		reserveOn(t, s, "n1", fmt.Sprint(i))
	}
	// A read through the store chains what the reservations queued.
	if _, err := s.AuditHead(context.Background()); err != nil {
		t.Fatal(err)
	}
	pool := adminPool(t, srv)
	_, err := pool.Exec(context.Background(), "UPDATE "+table(s, "audit")+
		` SET line = convert_to(replace(convert_from(line, 'UTF8'), '"principal":"p"', '"principal":"q"'), 'UTF8') WHERE seq = 3`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = audit.Verify(bytes.NewReader(exportAll(t, s)))
	var bad *audit.BadError
	if !errors.As(err, &bad) || bad.Seq != 3 {
		t.Fatalf("verify of a tampered ledger: %v, want entry 3 named", err)
	}
}

// TestLedgerPrune: pruning deletes the oldest entries up to the first not
// older than the cutoff, keeps the last deleted as the checkpoint, and
// what remains verifies from it; a second prune deletes nothing.
func TestLedgerPrune(t *testing.T) {
	needServer(t)
	s := newStore(t, postgres.Config{NodeID: "n1"})
	ctx := context.Background()
	old := time.Now().UTC().Add(-2 * time.Hour)
	for i := range 4 {
		key := store.Key{Principal: "p", RequestID: fmt.Sprint("old", i)}
		if _, err := s.Reserve(ctx, key, "fp", store.Execution{ID: fmt.Sprint("exec_old", i), Tool: "t", NodeID: "n1", StartedAt: old}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		reserveOn(t, s, "n1", fmt.Sprint("new", i))
	}
	n, err := s.PruneAudit(ctx, time.Now().Add(-time.Hour))
	if err != nil || n != 4 {
		t.Fatalf("PruneAudit: %d %v, want 4", n, err)
	}
	cp, err := s.AuditCheckpoint(ctx)
	if err != nil || cp.Seq != 4 {
		t.Fatalf("checkpoint %v %v, want seq 4", cp, err)
	}
	export := exportAll(t, s)
	if !bytes.HasPrefix(export, audit.CheckpointLine(nil, cp)) {
		t.Fatalf("the export does not begin with the checkpoint:\n%s", export)
	}
	v, err := audit.Verify(bytes.NewReader(export))
	if err != nil || v.Anchor != cp || v.Entries != 3 || v.Head.Seq != 7 {
		t.Fatalf("verify after prune: %+v %v", v, err)
	}
	if n, err := s.PruneAudit(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("second PruneAudit: %d %v, want 0", n, err)
	}
}

// TestLedgerSignOnce: two stores signing at once append one checkpoint
// between them, which verifies with the public key; another within the
// interval appends none.
func TestLedgerSignOnce(t *testing.T) {
	srv := needServer(t)
	schema := freshSchema()
	dsn := srv.DSN("postgres") + " pool_max_conns=4"
	a := openStore(t, dsn, postgres.Config{Schema: schema, NodeID: "n1"})
	b := openStore(t, dsn, postgres.Config{Schema: schema, NodeID: "n2"})
	pub, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, ok, err := a.SignAudit(ctx, key, "n1", time.Minute); err != nil || ok {
		t.Fatalf("SignAudit of an empty ledger: %v %v, want nothing signed", ok, err)
	}
	reserveOn(t, a, "n1", "1")
	reserveOn(t, b, "n2", "2")
	var wg sync.WaitGroup
	signed := make(chan bool, 2)
	for _, s := range []*postgres.Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := s.SignAudit(ctx, key, "n", time.Minute)
			if err != nil {
				t.Error(err)
			}
			signed <- ok
		}()
	}
	wg.Wait()
	close(signed)
	count := 0
	for ok := range signed {
		if ok {
			count++
		}
	}
	reserveOn(t, b, "n2", "3")
	if _, ok, err := b.SignAudit(ctx, key, "n2", time.Minute); err != nil || ok {
		t.Fatalf("SignAudit within the interval: %v %v, want nothing signed", ok, err)
	}
	v, err := audit.VerifyWith(bytes.NewReader(exportAll(t, a)), pub)
	if err != nil || count != 1 || v.Checkpoints != 1 || v.LastSigned != 2 || v.Head.Seq != 4 {
		t.Fatalf("signed %d; verify %+v %v; want one checkpoint of seq 2", count, v, err)
	}
}

// TestLedgerInterrupted: MarkInterrupted appends an interrupted entry per
// record it marked, by the store's node.
func TestLedgerInterrupted(t *testing.T) {
	needServer(t)
	s := newStore(t, postgres.Config{NodeID: "n9"})
	reserveOn(t, s, "n1", "a")
	reserveOn(t, s, "n1", "b")
	if n, err := s.MarkInterrupted(context.Background(), "n1"); err != nil || n != 2 {
		t.Fatalf("MarkInterrupted: %d %v", n, err)
	}
	es := entries(t, exportAll(t, s))
	if len(es) != 4 {
		t.Fatalf("%d entries, want 4", len(es))
	}
	for _, e := range es[2:] {
		if e.Kind != audit.KindInterrupted || e.Actor != "n9" || e.Status != "interrupted" || !strings.HasPrefix(e.ExecutionID, "exec_n1_") {
			t.Fatalf("entry %+v", e)
		}
	}
}

// TestMigrateToLedger opens tables at version 6 (made by a build before
// the ledger, here by undoing version 7) that hold a running record:
// version 7 adds the ledger in place, its chain starting empty, and the
// record's completion is its first entry, which verifies from genesis.
func TestMigrateToLedger(t *testing.T) {
	srv := needServer(t)
	ctx := context.Background()
	cfg := postgres.Config{Schema: freshSchema(), Logger: quiet, NodeID: "n1"}
	s := openStore(t, srv.DSN("postgres"), cfg)
	rec := reserveOn(t, s, "n1", "before")
	s.Close()
	admin := adminPool(t, srv)
	for _, sql := range []string{
		"DROP TABLE " + table(s, "audit"),
		"DROP TABLE " + table(s, "audit_head"),
		"DELETE FROM " + table(s, "schema_version") + " WHERE version >= 7",
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	again := openStore(t, srv.DSN("postgres"), cfg)
	if h, err := again.AuditHead(ctx); err != nil || h != audit.Start {
		t.Fatalf("head after the migration: %v %v, want an empty chain", h, err)
	}
	if _, err := again.Complete(ctx, rec.Key, rec.Fingerprint, completedResult(rec.ExecutionID, `{}`)); err != nil {
		t.Fatal(err)
	}
	export := exportAll(t, again)
	es := entries(t, export)
	if len(es) != 1 || es[0].Kind != audit.KindCompleted || es[0].PrevHash != audit.Genesis {
		t.Fatalf("entries after the migration: %+v", es)
	}
	if _, err := audit.Verify(bytes.NewReader(export)); err != nil {
		t.Fatal(err)
	}
}
