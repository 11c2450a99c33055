package main_test

import (
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/api/wire"
	"github.com/carmyhq/carmy/tests/pgtest"
	"github.com/carmyhq/carmy/tests/testutil"
)

// TestBlackBoxPostgresSingleNode: one node with --store postgres serves
// calls and replays, keeps them across its restart, shows the database
// in GET /v1/cluster and refuses the Raft membership routes (docs/operations.md#a-fleet-on-postgresql).
func TestBlackBoxPostgresSingleNode(t *testing.T) {
	t.Parallel()
	pg := needPostgres(t)
	bin := testutil.BuildCarmy(t)
	// A password in the URL (the server trusts the socket and never asks
	// for it) must not reach the log.
	const password = "hunter2secret"
	url := strings.Replace(pg.URL("postgres"), "carmy@", "carmy:"+password+"@", 1)
	n := startFleetNode(t, bin, "solo", url)

	first := call(t, n, "create_order", `{"sku":"KB-01"}`, "order-1")
	if first.status != http.StatusOK || first.Status != "completed" || first.Replayed {
		t.Fatalf("first call: %d %s", first.status, first.body)
	}
	again := call(t, n, "create_order", `{"sku":"KB-01"}`, "order-1")
	if again.status != http.StatusOK || !again.Replayed || again.ExecutionID != first.ExecutionID || string(again.Data) != string(first.Data) {
		t.Fatalf("retry: %d %s, want a replay of %s", again.status, again.body, first.body)
	}
	if c := call(t, n, "create_order", `{"sku":"OTHER"}`, "order-1"); c.status != http.StatusConflict || c.Error.Code != "IDEMPOTENCY_CONFLICT" {
		t.Fatalf("other arguments: %d %s, want 409 IDEMPOTENCY_CONFLICT", c.status, c.body)
	}

	st := getFleetStatus(t, n)
	if st.Store != "postgres" || st.Leader != nil || st.Database == nil || !st.Database.Reachable || st.Database.Version == "" ||
		heartbeatOf(st, "solo") != "alive" || st.Entries != 1 || st.Capacity != 100000 {
		t.Fatalf("GET /v1/cluster = %s", st.Raw)
	}
	_, err := apiClient(t, n.URL, "").AddNode(t.Context(), wire.NodeSpec{ID: "x", RaftAddr: "127.0.0.1:1", HTTPAddr: "127.0.0.1:2"})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != client.CodeInvalidState {
		t.Fatalf("POST /v1/cluster/nodes: %v, want 409 INVALID_STATE", err)
	}
	_, err = apiClient(t, n.URL, "").RemoveNode(t.Context(), "solo")
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != client.CodeInvalidState {
		t.Fatalf("DELETE /v1/cluster/nodes/solo: %v, want 409 INVALID_STATE", err)
	}
	out, err := exec.Command(bin, "cluster", "status", "--addr", n.Addr).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Store: PostgreSQL") || !regexp.MustCompile(`(?m)^solo +127\.0\.0\.1:\d+ +alive `).Match(out) {
		t.Fatalf("carmy cluster status: %v\n%s", err, out)
	}
	if strings.Contains(n.Logs(), "raft") && strings.Contains(n.Logs(), "entering leader state") {
		t.Fatal("a node with --store postgres started Raft")
	}

	// Restarted, the node replays from the database.
	if err := n.Stop(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, n.Logs())
	}
	if strings.Contains(n.Logs(), password) {
		t.Fatalf("the log shows the password:\n%s", n.Logs())
	}
	n = startFleetNode(t, bin, "solo", url)
	after := call(t, n, "create_order", `{"sku":"KB-01"}`, "order-1")
	if after.status != http.StatusOK || !after.Replayed || after.ExecutionID != first.ExecutionID {
		t.Fatalf("after a restart: %d %s, want a replay of %s", after.status, after.body, first.body)
	}
}

// TestBlackBoxPostgresFleet: three stateless nodes on one database. A call
// made on one is replayed by the others; concurrent duplicates spread over
// the nodes run the tool once; a cancel asked of one node stops the tool
// on another; a node killed with a call running is seen dead and its
// execution marked interrupted within the bound (docs/guarantees.md, docs/operations.md#a-fleet-on-postgresql).
func TestBlackBoxPostgresFleet(t *testing.T) {
	t.Parallel()
	pg := needPostgres(t)
	bin := testutil.BuildCarmy(t)
	url := pg.URL("postgres")
	const lease = 2 * time.Second
	nodes := []*testutil.Node{
		startFleetNode(t, bin, "a", url, "--store-lease", lease.String()),
		startFleetNode(t, bin, "b", url, "--store-lease", lease.String()),
		startFleetNode(t, bin, "c", url, "--store-lease", lease.String()),
	}
	a, b, c := nodes[0], nodes[1], nodes[2]

	t.Run("replayed by every node", func(t *testing.T) {
		first := call(t, a, "create_order", `{"sku":"KB-01"}`, "fleet-1")
		if first.status != http.StatusOK || first.Replayed {
			t.Fatalf("first call: %d %s", first.status, first.body)
		}
		for _, n := range []*testutil.Node{b, c} {
			r := call(t, n, "create_order", `{"sku":"KB-01"}`, "fleet-1")
			if r.status != http.StatusOK || !r.Replayed || r.ExecutionID != first.ExecutionID || string(r.Data) != string(first.Data) {
				t.Fatalf("on %s: %d %s, want a replay of %s", n.ID(), r.status, r.body, first.body)
			}
		}
	})

	t.Run("concurrent duplicates run once", func(t *testing.T) {
		const callers = 30
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			orders = map[string]int{}
			fresh  int
		)
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := tryCall(nodes[i%3], "create_order", `{"sku":"DUP"}`, "dup-1")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case r.status == http.StatusOK:
					orders[string(r.Data)]++
					if !r.Replayed {
						fresh++
					}
				case r.status == http.StatusConflict && r.Error.Code == "EXECUTION_UNCERTAIN" && r.Error.Status == "running":
				default:
					t.Errorf("caller %d: %d %s", i, r.status, r.body)
				}
			}()
		}
		wg.Wait()
		if fresh != 1 || len(orders) != 1 {
			t.Fatalf("%d fresh answers and %d distinct orders %v, want 1 and 1", fresh, len(orders), orders)
		}
	})

	t.Run("cancel reaches the runner's node", func(t *testing.T) {
		running := asyncCall(a, "sleep", `{"ms":30000}`, "cancel-me")
		var id string
		testutil.WaitFor(t, 20*time.Second, "the execution to be running", func() error {
			got, err := runningID(t, c, "cancel-me")
			id = got
			return err
		})
		asked := time.Now()
		if e, err := apiClient(t, c.URL, "").Cancel(t.Context(), id); err != nil || e.Status != client.StatusCancelled {
			t.Fatalf("cancel on c: %+v, %v", e, err)
		}
		select {
		case r := <-running:
			if r.status != http.StatusOK || r.Status != "cancelled" {
				t.Fatalf("the call on a: %d %s, want cancelled", r.status, r.body)
			}
			t.Logf("the tool on a stopped %s after the cancel on c", time.Since(asked).Round(time.Millisecond))
		case <-time.After(20 * time.Second):
			t.Fatal("the tool on a was not cancelled within 20 s of the cancel on c (its sleep is 30 s)")
		}
	})

	t.Run("a killed node's execution becomes interrupted", func(t *testing.T) {
		_ = asyncCall(b, "sleep", `{"ms":60000}`, "orphan")
		var id string
		testutil.WaitFor(t, 20*time.Second, "the execution to be running", func() error {
			got, err := runningID(t, a, "orphan")
			id = got
			return err
		})
		b.Kill()
		killed := time.Now()
		// The bound is 3/2 of the lease plus a sweep; the 30 s of docs/operations.md#a-fleet-on-postgresql is for
		// the default 10 s lease.
		testutil.WaitFor(t, 30*time.Second, "b's execution to be interrupted", func() error {
			if r := execution(t, c, id); r.Status != "interrupted" {
				return fmt.Errorf("status %s", r.Status)
			}
			return nil
		})
		t.Logf("interrupted %s after kill -9 (lease %s)", time.Since(killed).Round(time.Millisecond), lease)
		if r := call(t, a, "sleep", `{"ms":60000}`, "orphan"); r.status != http.StatusConflict || r.Error.Code != "EXECUTION_UNCERTAIN" || r.Error.Status != "interrupted" {
			t.Fatalf("a retry: %d %s, want 409 EXECUTION_UNCERTAIN interrupted", r.status, r.body)
		}
		if st := getFleetStatus(t, a); heartbeatOf(st, "b") != "dead" || heartbeatOf(st, "a") != "alive" || heartbeatOf(st, "c") != "alive" {
			t.Fatalf("GET /v1/cluster: %s, want b dead, a and c alive", st.Raw)
		}
	})
}

// TestBlackBoxPostgresRestartUnderLoad: issue 30's target. PostgreSQL is
// stopped with pg_ctl's -m immediate (SIGQUIT: no checkpoint, crash
// recovery at the next start) while 50 clients call two nodes, each call
// under its own request_id and retried on 503 and 409 as docs/guarantees.md tells
// them; then it starts again. While it is down calls are refused 503
// UNAVAILABLE; once it is back the nodes serve again (the time is
// logged), and every call that was answered 200, before, during or after,
// is replayed afterwards with the same execution and data: no
// acknowledged record was lost.
func TestBlackBoxPostgresRestartUnderLoad(t *testing.T) {
	testutil.LongTier(t, "PostgreSQL killed under load")
	// Not parallel: its 50 clients calling without pause load the machine while it stops and restarts PostgreSQL.
	pg := needPostgres(t)
	bin := testutil.BuildCarmy(t)
	url := pg.URL("postgres")
	nodes := []*testutil.Node{startFleetNode(t, bin, "a", url), startFleetNode(t, bin, "b", url)}

	const clients = 50
	type acked struct {
		node          int
		execID, data  string
		requestID     string
		answeredAfter time.Duration
	}
	var (
		mu        sync.Mutex
		acks      []acked
		refused   int // 503s
		uncertain int // 409 EXECUTION_UNCERTAIN
		stop      = make(chan struct{})
		wg        sync.WaitGroup
		began     = time.Now()
	)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				id := fmt.Sprintf("load-%d-%d", i, k)
				n := (i + k) % len(nodes)
				for attempt := 0; ; attempt++ {
					select {
					case <-stop:
						return
					default:
					}
					r, err := tryCall(nodes[n], "create_order", fmt.Sprintf(`{"sku":%q}`, id), id)
					switch {
					case err != nil:
						t.Errorf("%s: %v", id, err)
						return
					case r.status == http.StatusOK && r.Status == "completed":
						mu.Lock()
						acks = append(acks, acked{node: n, execID: r.ExecutionID, data: string(r.Data), requestID: id, answeredAfter: time.Since(began)})
						mu.Unlock()
					case r.status == http.StatusServiceUnavailable && r.Error.Code == "UNAVAILABLE":
						mu.Lock()
						refused++
						mu.Unlock()
						time.Sleep(100 * time.Millisecond)
						continue
					case r.status == http.StatusConflict && r.Error.Code == "EXECUTION_UNCERTAIN":
						mu.Lock()
						uncertain++
						mu.Unlock()
						time.Sleep(100 * time.Millisecond)
						continue
					default:
						t.Errorf("%s: %d %s", id, r.status, r.body)
						return
					}
					break
				}
			}
		}()
	}
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(acks), refused
	}
	testutil.WaitFor(t, 60*time.Second, "200 calls answered", func() error {
		if n, _ := count(); n < 200 {
			return fmt.Errorf("%d answered", n)
		}
		return nil
	})
	before, _ := count()
	stopped := time.Now()
	if err := pg.Stop(syscall.SIGQUIT); err != nil { // pg_ctl stop -m immediate
		t.Fatal(err)
	}
	// Down: calls are refused.
	testutil.WaitFor(t, 30*time.Second, "calls refused while PostgreSQL is down", func() error {
		if _, r := count(); r == 0 {
			return fmt.Errorf("none refused yet")
		}
		return nil
	})
	for _, n := range nodes {
		// Readiness follows the heartbeat, every lease/4.
		testutil.WaitFor(t, 10*time.Second, n.ID()+" not ready while PostgreSQL is down", func() error {
			if code, body := do(t, http.MethodGet, n.URL+"/readyz", ""); code != http.StatusServiceUnavailable {
				return fmt.Errorf("/readyz %d %s", code, body)
			}
			return nil
		})
	}
	time.Sleep(2 * time.Second) // stays down a while under load
	during, refusedDown := count()
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	for _, n := range nodes {
		testutil.WaitFor(t, 30*time.Second, n.ID()+" serving calls again", func() error {
			id := fmt.Sprintf("probe-%s-%d", n.ID(), time.Now().UnixNano())
			r, err := tryCall(n, "create_order", `{"sku":"probe"}`, id)
			if err != nil || r.status != http.StatusOK {
				return fmt.Errorf("%d %s %v", r.status, r.body, err)
			}
			return nil
		})
		t.Logf("%s serves calls %s after PostgreSQL accepts connections again", n.ID(), time.Since(back).Round(time.Millisecond))
	}
	testutil.WaitFor(t, 60*time.Second, "200 more calls answered", func() error {
		if n, _ := count(); n < during+200 {
			return fmt.Errorf("%d answered", n-during)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	t.Logf("%d calls answered 200 (%d before the stop, %d while it was down or recovering), %d refused 503 (%d while down, %s), %d answered EXECUTION_UNCERTAIN",
		len(acks), before, during-before, refused, refusedDown, back.Sub(stopped).Round(time.Millisecond), uncertain)

	// Every acknowledged call is replayed, on the other node, as it was.
	var lost []string
	for _, ack := range acks {
		r := call(t, nodes[(ack.node+1)%len(nodes)], "create_order", fmt.Sprintf(`{"sku":%q}`, ack.requestID), ack.requestID)
		if r.status != http.StatusOK || !r.Replayed || r.ExecutionID != ack.execID || string(r.Data) != ack.data {
			lost = append(lost, fmt.Sprintf("%s (answered at %s): now %d %s", ack.requestID, ack.answeredAfter.Round(time.Millisecond), r.status, r.body))
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged calls not replayed as answered:\n%s", len(lost), len(acks), strings.Join(lost, "\n"))
	}
}

// TestBlackBoxPostgresPartitionedNodeComesBack: node a reaches PostgreSQL
// through a proxy that cuts it off while two of its calls run; node b
// still reaches it. b sees a's heartbeat lapse and marks both executions
// interrupted; a refuses new calls. An operator resolves one of them on
// b. When a comes back and its tools finish, it records over the
// interrupted mark only as any late runner does: the execution left
// alone gets a's result; the resolved one keeps its resolution (docs/guarantees.md,
// docs/api.md#reconciling-cancel-and-resolve, docs/operations.md#a-fleet-on-postgresql).
func TestBlackBoxPostgresPartitionedNodeComesBack(t *testing.T) {
	t.Parallel()
	pg := needPostgres(t)
	proxy, err := pgtest.NewProxy(pg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	bin := testutil.BuildCarmy(t)
	const lease = "2s"
	a := startFleetNode(t, bin, "a", proxy.URL("postgres"), "--store-lease", lease)
	b := startFleetNode(t, bin, "b", pg.URL("postgres"), "--store-lease", lease)

	const sleep = `{"ms":12000}`
	left, resolved := asyncCall(a, "sleep", sleep, "left-alone"), asyncCall(a, "sleep", sleep, "resolved")
	ids := map[string]string{}
	for _, rid := range []string{"left-alone", "resolved"} {
		testutil.WaitFor(t, 20*time.Second, rid+" running", func() error {
			got, err := runningID(t, b, rid)
			ids[rid] = got
			return err
		})
	}
	proxy.Cut()
	cut := time.Now()
	for _, rid := range []string{"left-alone", "resolved"} {
		testutil.WaitFor(t, 20*time.Second, rid+" interrupted by b", func() error {
			if r := execution(t, b, ids[rid]); r.Status != "interrupted" {
				return fmt.Errorf("status %s", r.Status)
			}
			return nil
		})
	}
	t.Logf("a's executions interrupted %s after a was cut off", time.Since(cut).Round(time.Millisecond))
	if r := call(t, a, "create_order", `{"sku":"x"}`, "while-cut"); r.status != http.StatusServiceUnavailable || r.Error.Code != "UNAVAILABLE" {
		t.Fatalf("a call on a while it is cut off: %d %s, want 503 UNAVAILABLE", r.status, r.body)
	}
	if st := getFleetStatus(t, b); heartbeatOf(st, "a") != "dead" {
		t.Fatalf("b's GET /v1/cluster: %s, want a dead", st.Raw)
	}
	if _, err := apiClient(t, b.URL, "").Resolve(t.Context(), ids["resolved"], client.Completed(map[string]string{"by": "operator"})); err != nil {
		t.Fatalf("resolve on b: %v", err)
	}
	proxy.Restore()

	// a's tools finish after it is back: the late runner's rules.
	for _, ch := range []<-chan pgCall{left, resolved} {
		select {
		case <-ch:
		case <-time.After(60 * time.Second):
			t.Fatal("a's calls did not answer")
		}
	}
	testutil.WaitFor(t, 30*time.Second, "a's result recorded over the interrupted mark", func() error {
		if r := execution(t, b, ids["left-alone"]); r.Status != "completed" || r.Resolved || !strings.Contains(string(r.Data), "slept_ms") {
			return fmt.Errorf("%+v (data %s)", r, r.Data)
		}
		return nil
	})
	if r := execution(t, b, ids["resolved"]); r.Status != "completed" || !r.Resolved || !strings.Contains(string(r.Data), "operator") {
		t.Fatalf("the resolved execution after a came back: %+v (data %s), want the operator's resolution", r, r.Data)
	}
	testutil.WaitFor(t, 20*time.Second, "a serving again", func() error {
		if r, err := tryCall(a, "create_order", `{"sku":"x"}`, "after-cut"); err != nil || r.status != http.StatusOK {
			return fmt.Errorf("%d %s %v", r.status, r.body, err)
		}
		return nil
	})
}
