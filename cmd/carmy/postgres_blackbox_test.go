package main_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/testutil"
)

// TestBlackBoxPostgresSingleNode: one node with --store postgres serves
// calls and replays, keeps them across its restart, shows the database
// in GET /v1/cluster and refuses the Raft membership routes (SPEC §8).
func TestBlackBoxPostgresSingleNode(t *testing.T) {
	pg := needPostgres(t)
	bin := testutil.BuildCarmy(t)
	n := startFleetNode(t, bin, "solo", pg.URL("postgres"))

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
	if st.Store != "postgres" || st.Leader != nil || !st.Database.Reachable || st.Database.Version == "" ||
		st.heartbeatOf("solo") != "alive" || st.Entries != 1 || st.Capacity != 100000 {
		t.Fatalf("GET /v1/cluster = %+v", st)
	}
	if code, body := do(t, http.MethodPost, n.URL+"/v1/cluster/nodes", `{"id":"x","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`); code != http.StatusConflict || !strings.Contains(body, "INVALID_STATE") {
		t.Fatalf("POST /v1/cluster/nodes: %d %s, want 409 INVALID_STATE", code, body)
	}
	if code, body := do(t, http.MethodDelete, n.URL+"/v1/cluster/nodes/solo", ""); code != http.StatusConflict || !strings.Contains(body, "INVALID_STATE") {
		t.Fatalf("DELETE /v1/cluster/nodes/solo: %d %s, want 409 INVALID_STATE", code, body)
	}
	if strings.Contains(n.Logs(), "raft") && strings.Contains(n.Logs(), "entering leader state") {
		t.Fatal("a node with --store postgres started Raft")
	}

	// Restarted, the node replays from the database.
	if err := n.Stop(20 * time.Second); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, n.Logs())
	}
	n = startFleetNode(t, bin, "solo", pg.URL("postgres"))
	after := call(t, n, "create_order", `{"sku":"KB-01"}`, "order-1")
	if after.status != http.StatusOK || !after.Replayed || after.ExecutionID != first.ExecutionID {
		t.Fatalf("after a restart: %d %s, want a replay of %s", after.status, after.body, first.body)
	}
}

// TestBlackBoxPostgresFleet: three stateless nodes on one database. A call
// made on one is replayed by the others; concurrent duplicates spread over
// the nodes run the tool once; a cancel asked of one node stops the tool
// on another; a node killed with a call running is seen dead and its
// execution marked interrupted within the bound (SPEC §1, §8).
func TestBlackBoxPostgresFleet(t *testing.T) {
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
			code, body := do(t, http.MethodGet, c.URL+"/v1/executions?request_id=cancel-me", "")
			var r pgCall
			_ = json.Unmarshal([]byte(body), &r)
			if code != http.StatusOK || r.Status != "running" {
				return fmt.Errorf("%d %s", code, body)
			}
			id = r.ExecutionID
			return nil
		})
		asked := time.Now()
		if code, body := do(t, http.MethodPost, c.URL+"/v1/executions/"+id+"/cancel", ""); code != http.StatusOK || !strings.Contains(body, `"cancelled"`) {
			t.Fatalf("cancel on c: %d %s", code, body)
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
			code, body := do(t, http.MethodGet, a.URL+"/v1/executions?request_id=orphan", "")
			var r pgCall
			_ = json.Unmarshal([]byte(body), &r)
			if code != http.StatusOK || r.Status != "running" {
				return fmt.Errorf("%d %s", code, body)
			}
			id = r.ExecutionID
			return nil
		})
		b.Kill()
		killed := time.Now()
		// The bound is 3/2 of the lease plus a sweep; SPEC's 30 s is for
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
		if st := getFleetStatus(t, a); st.heartbeatOf("b") != "dead" || st.heartbeatOf("a") != "alive" || st.heartbeatOf("c") != "alive" {
			t.Fatalf("GET /v1/cluster: %+v, want b dead, a and c alive", st)
		}
	})
}
