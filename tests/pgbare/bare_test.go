package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/tests/testutil"
)

// TestBareCallsAreWritten runs the bare program against a real
// PostgreSQL for a moment and checks that what it counts is what the
// table holds: every call it counted is a completed record of the fleet's
// table, with a seq from the fleet's sequence, and no record is left
// running but the calls in flight when it stopped.
func TestBareCallsAreWritten(t *testing.T) {
	srv := testutil.NeedPostgres(t)
	dsn := srv.DSN("postgres")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"-dsn", dsn, "-schema", "bare_t", "-pools", "3", "-clients", "12",
		"-warmup", "0s", "-duration", "1500ms", "-json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	if res.Calls == 0 || res.CallsPerSec <= 0 || res.Rounds == 0 || res.Pools != 3 || res.Clients != 12 {
		t.Fatalf("result %+v: want calls, rounds, and the pools and clients asked for", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var completed, running, nodes, distinctSeq int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'completed'), count(*) FILTER (WHERE status = 'running'),
	count(DISTINCT node_id), count(DISTINCT seq) FROM bare_t.carmy_records`).Scan(&completed, &running, &nodes, &distinctSeq); err != nil {
		t.Fatal(err)
	}
	if completed < res.Calls || running > 12 || nodes != 3 || distinctSeq != completed+running {
		t.Fatalf("table: %d completed, %d running, %d nodes, %d seqs; counted %d calls", completed, running, nodes, distinctSeq, res.Calls)
	}
}

// TestBareUsage refuses flags that cannot measure anything.
func TestBareUsage(t *testing.T) {
	for _, args := range [][]string{{"-dsn", ""}, {"-dsn", "x", "-pools", "0"}, {"-dsn", "x", "-duration", "0s"}, {"-dsn", "x", "extra"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "pgbare") {
			t.Errorf("%q: exit %d, stderr %q: want 2 and a reason", args, code, errb.String())
		}
	}
}
