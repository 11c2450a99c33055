package main_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/carmyhq/carmy/tests/pgtest"
	"github.com/carmyhq/carmy/tests/testutil"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// Issue 39: --store took only postgres:// URLs, and with the database
// down a tenant's 503 quoted pgx's error — the database's user, name and
// socket. A key=value connection string is accepted (its password kept
// out of the log), and the 503 says only that the store is unavailable;
// the detail is in the node's log.
func TestBlackBoxPostgresKeyValueDSNAndQuietOutage(t *testing.T) {
	t.Parallel()
	pg := needPostgres(t)
	const db = "orders_kv_dsn"
	createDatabase(t, pg, db)
	bin := testutil.BuildCarmy(t)
	// The server trusts the socket and never asks for the password.
	const password = "hunter2secret"
	dsn := pg.DSN(db) + " password='" + password + "'"
	n := startFleetNode(t, bin, "kv", dsn)
	if c := call(t, n, "create_order", `{"sku":"KB-01"}`, "order-1"); c.status != http.StatusOK || c.Status != "completed" {
		t.Fatalf("a call on a key=value DSN: %d %s", c.status, c.body)
	}

	if err := pg.Stop(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var down pgCall
	wait.For(t, 30*time.Second, "a 503 with the database down", func() error {
		c, err := tryCall(n, "create_order", `{"sku":"KB-02"}`, "order-2")
		if err != nil {
			return err
		}
		if c.status != http.StatusServiceUnavailable {
			return fmt.Errorf("answered %d %s", c.status, c.body)
		}
		down = c
		return nil
	})
	t.Logf("with the database down: %s", down.body)
	if !strings.Contains(down.body, "the store is unavailable") {
		t.Errorf("the 503 = %s; want it to say the store is unavailable", down.body)
	}
	for _, detail := range []string{pg.Dir, "user=", pgtest.User, db, ".s.PGSQL", "dial", "postgres"} {
		if strings.Contains(down.body, detail) {
			t.Errorf("the 503 shows %q: %s", detail, down.body)
		}
	}
	// The detail is the node's, in its log.
	wait.Until(t, 10*time.Second, "the node's log to have the store's failure", func() bool {
		return strings.Contains(n.Logs(), `msg="the store failed"`) && strings.Contains(n.Logs(), pg.Dir)
	})
	if strings.Contains(n.Logs(), password) {
		t.Fatalf("the log shows the password:\n%s", n.Logs())
	}
}

// createDatabase creates the database name on pg.
func createDatabase(t *testing.T, pg *pgtest.Server, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, pg.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name).ReadAll(); err != nil {
		t.Fatal(err)
	}
}
