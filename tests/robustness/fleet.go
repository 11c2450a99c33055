package robustness

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/tests/dockertest"
	"github.com/carmyhq/carmy/tests/testutil"
)

// A fleet run (docs/operations.md#a-fleet-on-postgresql): one PostgreSQL container ("db", the image
// `scripts/image --postgres` builds) and size carmy nodes that share it
// with --store postgres://…: no Raft, no gossip, no leader. The harness
// reaches the database too, through its published port, to kill the
// nodes' connections and to tell whether it answers.

// Stores a run can use.
const (
	storeRaft     = "raft"
	storePostgres = "postgres"
)

// The database of a fleet run.
const (
	dbName     = "db" // its container's name and host name
	pgPort     = 5432
	pgUser     = "carmy"
	pgDatabase = "carmy"
	// pgPasswordFile is the password's file, beside the TLS files.
	pgPasswordFile = "pgpassword"
	// fleetLease is the nodes' --store-lease: short, as the Raft nodes'
	// --fast-failover, so that a silent node is dead within 3 s and its
	// executions are marked within 4.5 s.
	fleetLease = 3 * time.Second
)

// fleetDB is a fleet run's database container.
type fleetDB struct {
	c        *dockertest.Container
	password string
}

// hostURL is where the harness reaches the database now ("" while its port
// is not published).
func (f *fleetDB) hostURL() string {
	addr := f.c.HostAddr()
	if addr == "" {
		return ""
	}
	return pgURL(addr, f.password)
}

func pgURL(addr, password string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(pgUser, password), Host: addr, Path: "/" + pgDatabase,
		RawQuery: "sslmode=disable&connect_timeout=3&application_name=robustness"}
	return u.String()
}

// pgReady returns a Ready of dockertest.ServiceOptions: the server at
// hostAddr accepts the password and answers a query.
func pgReady(password string) func(hostAddr string) error {
	return func(hostAddr string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		return pgPing(ctx, pgURL(hostAddr, password))
	}
}

func pgPing(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

// reachable reports whether the database answers the harness now.
func (f *fleetDB) reachable(ctx context.Context) error {
	dsn := f.hostURL()
	if dsn == "" {
		return errors.New("the database's port is not published (down)")
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return pgPing(ctx, dsn)
}

// terminator ends the nodes' connections to the database, over a
// connection of the harness's own that it keeps (opened again when lost).
type terminator struct {
	db   *fleetDB
	conn *pgx.Conn
}

// terminate ends every connection of the nodes' role but the harness's
// own (pg_terminate_backend) and returns how many it ended.
func (tm *terminator) terminate(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if tm.conn == nil || tm.conn.IsClosed() {
		dsn := tm.db.hostURL()
		if dsn == "" {
			return 0, errors.New("the database's port is not published (down)")
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return 0, err
		}
		tm.conn = conn
	}
	var n int
	err := tm.conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE usename = $1 AND pid <> pg_backend_pid()) AS ended`, pgUser).Scan(&n)
	if err != nil {
		tm.close()
	}
	return n, err
}

func (tm *terminator) close() {
	if tm.conn != nil {
		tm.conn.Close(context.Background())
		tm.conn = nil
	}
}

// fleetArgs are a fleet node's arguments (after the ones Launch gives,
// which a fleet node does not use: its data dir, Raft and gossip
// addresses, cluster key).
func fleetArgs() []string {
	return []string{
		"--config", "/etc/carmy.yaml",
		"--store", fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", pgUser, dbName, pgPort, pgDatabase),
		"--store-password-file", tlsDir + "/" + pgPasswordFile,
		"--store-lease", fleetLease.String(),
	}
}

// startFleet builds the test image and the PostgreSQL test image, starts
// the database, the ledger and size fleet nodes, and waits until they are
// whole (waitFleetWhole).
func startFleet(t testing.TB, size int) *testCluster {
	t.Helper()
	image := dockertest.BuildTestImage(t)
	pgImage := dockertest.BuildPostgresImage(t)
	names := make([]string, 0, size)
	for i := 1; i <= size; i++ {
		names = append(names, fmt.Sprintf("n%d", i))
	}
	// The nodes' TLS files serve the harness's client as in a Raft run; a
	// fleet node has no node-to-node endpoints to guard with them.
	secrets := writeNodeTLS(t, append(slices.Clone(names), "harness"))
	password := randomPassword(t)
	if err := os.WriteFile(filepath.Join(secrets, pgPasswordFile), []byte(password+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mount := secrets + ":" + tlsDir + ":ro"
	tokens := newRunTokens(t)
	network := dockertest.NewNetworkWith(t, fmt.Sprintf("robustpg%d", size), dockertest.Options{
		Image: image, Mounts: []string{mount}, Env: tokens.env(),
	})
	c := &testCluster{t: t, net: network, nc: newNodeClient(t, network.ClusterKey(), secrets, tokens), names: names}
	db, err := network.StartService(dbName, dockertest.ServiceOptions{
		Image: pgImage, Port: pgPort, Mounts: []string{mount},
		Env:   []string{"POSTGRES_USER=" + pgUser, "POSTGRES_DB=" + pgDatabase, "POSTGRES_PASSWORD_FILE=" + tlsDir + "/" + pgPasswordFile},
		Ready: pgReady(password),
	})
	if err != nil {
		t.Fatalf("starting the database: %v", err)
	}
	c.fleet = &fleetDB{c: db, password: password}
	ledger, err := network.StartHelper("ledger", "/ledger", ledgerPort, "--addr", fmt.Sprintf(":%d", ledgerPort))
	if err != nil {
		t.Fatalf("starting the ledger: %v", err)
	}
	c.ledger = ledger
	// Nodes of a fleet start in any order (the first to take the
	// database's advisory lock migrates the schema): all at once.
	if err := each(names, func(name string) error {
		if _, err := network.Launch(name, fleetArgs()...); err != nil {
			return fmt.Errorf("starting %s: %w", name, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.waitFleetWhole(context.Background(), 2*time.Minute); err != nil {
		t.Fatalf("the fleet did not form: %v\n%s", err, c.describe())
	}
	return c
}

func randomPassword(t testing.TB) string {
	t.Helper()
	return strings.NewReplacer("+", "x", "/", "y", "=", "").Replace(gossipKey(t))
}

// waitFleetWhole waits until the fleet is whole: every node ready, every
// node listing every node's heartbeat alive and the database reachable
// in GET /v1/cluster, and the database answering the harness.
func (c *testCluster) waitFleetWhole(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := c.fleetWhole(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		if !sleep(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

func (c *testCluster) fleetWhole(ctx context.Context) error {
	if err := c.fleet.reachable(ctx); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	for _, name := range c.names {
		n := c.node(name)
		if n == nil || n.URL() == "" {
			return fmt.Errorf("%s: no published port", name)
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := testutil.CheckReady(cctx, n.URL())
		var st testutil.ClusterStatus
		if err == nil {
			st, err = c.nc.status(cctx, n.URL())
		}
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := fleetViewWhole(st, c.names); err != nil {
			return fmt.Errorf("%s sees %w", name, err)
		}
	}
	return nil
}

// fleetViewWhole checks one node's GET /v1/cluster: a fleet, its database
// reachable, every one of names alive.
func fleetViewWhole(st testutil.ClusterStatus, names []string) error {
	if st.Store != storePostgres || st.Database == nil {
		return fmt.Errorf("no fleet: store %q", st.Store)
	}
	if !st.Database.Reachable {
		return errors.New("the database unreachable")
	}
	for _, name := range names {
		m, ok := st.Member(name)
		if !ok {
			return fmt.Errorf("no heartbeat of %s", name)
		}
		if m.Heartbeat != "alive" {
			return fmt.Errorf("%s %s (last heartbeat %s)", name, m.Heartbeat, m.LastHeartbeat)
		}
	}
	return nil
}

// awaitDeclaredDead waits until every node of others lists target's
// heartbeat as dead, and says when; not within electTimeout is an
// anomaly: the others would never mark its executions interrupted.
func (nm *nemesis) awaitDeclaredDead(target string, others []string) string {
	start := time.Now()
	deadline := start.Add(electTimeout)
	var last error
	for time.Now().Before(deadline) {
		if last = nm.c.allSee(others, func(st testutil.ClusterStatus) error {
			if m, ok := st.Member(target); ok && m.Heartbeat == "alive" {
				return fmt.Errorf("%s still alive (last heartbeat %s)", target, m.LastHeartbeat)
			}
			return nil
		}); last == nil {
			return fmt.Sprintf("declared dead by %v after %.1fs", others, time.Since(start).Seconds())
		}
		time.Sleep(200 * time.Millisecond)
	}
	nm.anomaly(fmt.Sprintf("silent %s: %v did not declare it dead within %s: %v\n%s", target, others, electTimeout, last, nm.c.describe()))
	return "not declared dead"
}

// awaitRefusing waits until every node refuses to be ready (/readyz not
// 200) while the database is unreachable, and says when; not within
// electTimeout is an anomaly (docs/operations.md#a-fleet-on-postgresql: calls fail closed).
func (nm *nemesis) awaitRefusing() string {
	start := time.Now()
	deadline := start.Add(electTimeout)
	var last error
	for time.Now().Before(deadline) {
		last = nil
		for _, name := range nm.c.names {
			n := nm.c.node(name)
			if n == nil || n.URL() == "" {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := testutil.CheckReady(ctx, n.URL())
			cancel()
			if err == nil || !strings.HasPrefix(err.Error(), "/readyz ") { // ready, or no answer
				last = fmt.Errorf("%s: not refusing (%v)", name, err)
				break
			}
		}
		if last == nil {
			return fmt.Sprintf("every node unready after %.1fs", time.Since(start).Seconds())
		}
		time.Sleep(200 * time.Millisecond)
	}
	nm.anomaly(fmt.Sprintf("the database down: a node stayed ready for %s: %v\n%s", electTimeout, last, nm.c.describe()))
	return "a node stayed ready"
}

// allSee checks every named node's GET /v1/cluster with fn.
func (c *testCluster) allSee(names []string, fn func(testutil.ClusterStatus) error) error {
	for _, name := range names {
		n := c.node(name)
		if n == nil || n.URL() == "" {
			return fmt.Errorf("%s: no published port", name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := c.nc.status(ctx, n.URL())
		cancel()
		if err == nil {
			err = fn(st)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// describeFleet returns every node's view of the fleet, and the
// database's state, for failures.
func (c *testCluster) describeFleet() string {
	var b strings.Builder
	if err := c.fleet.reachable(context.Background()); err != nil {
		fmt.Fprintf(&b, "database: %v\n", err)
	} else {
		b.WriteString("database: answers the harness\n")
	}
	for _, name := range c.names {
		n := c.node(name)
		if n == nil || n.URL() == "" {
			fmt.Fprintf(&b, "%s: not reachable\n", name)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		ready := testutil.CheckReady(ctx, n.URL())
		st, err := c.nc.status(ctx, n.URL())
		cancel()
		if err != nil {
			fmt.Fprintf(&b, "%s: ready %v; %v\n", name, ready, err)
			continue
		}
		fmt.Fprintf(&b, "%s: ready %v; database %+v;", name, ready, st.Database)
		for _, m := range st.Nodes {
			fmt.Fprintf(&b, " %s %s (%s)", m.ID, m.Heartbeat, m.LastHeartbeat)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// markTimeout bounds how long the others may take to mark a dead node's
// running executions interrupted (docs/operations.md#a-fleet-on-postgresql: 30 s at most).
const markTimeout = 30 * time.Second

// awaitMarked waits, once target is declared dead, until none of its
// executions is listed running by the others (their liveness sweep marks
// them interrupted, for the reconcile probe to settle), and says how many
// there were; one still running after markTimeout is an anomaly.
func (nm *nemesis) awaitMarked(target string, others []string) string {
	start := time.Now()
	first := -1
	var last error
	for time.Since(start) < markTimeout {
		running, err := nm.c.runningOf(target, others)
		if err == nil && first < 0 {
			first = len(running)
		}
		if err == nil && len(running) == 0 {
			return fmt.Sprintf("its %d running executions marked after %.1fs", max(first, 0), time.Since(start).Seconds())
		}
		if last = err; err == nil {
			last = fmt.Errorf("still running: %v", running)
		}
		time.Sleep(200 * time.Millisecond)
	}
	nm.anomaly(fmt.Sprintf("dead %s: its executions not marked interrupted within %s: %v\n%s", target, markTimeout, last, nm.c.describe()))
	return "its executions not marked"
}

// runningOf lists the executions of node target that one of others (the
// first that answers) lists running.
func (c *testCluster) runningOf(target string, others []string) ([]string, error) {
	var last error
	for _, name := range others {
		n := c.node(name)
		if n == nil || n.URL() == "" {
			continue
		}
		api, err := c.nc.api(n.URL())
		if err != nil {
			return nil, err
		}
		var out []string
		opts := client.ListOptions{Limit: 200, Statuses: []client.Status{client.StatusRunning}}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			page, err := api.ListExecutions(ctx, session, opts)
			cancel()
			if err != nil {
				last = err
				break
			}
			for _, e := range page.Executions {
				if e.NodeID == target && e.Status == client.StatusRunning {
					out = append(out, e.ExecutionID)
				}
			}
			if page.NextCursor == "" {
				return out, nil
			}
			opts.Cursor = page.NextCursor
		}
	}
	return nil, fmt.Errorf("no other node listed the executions: %v", last)
}
