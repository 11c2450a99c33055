package dockertest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/dockertest"
	"github.com/carmyhq/carmy/tests/testutil"
)

// formTimeout bounds each wait for the cluster to settle after a fault.
const formTimeout = 90 * time.Second

// TestCluster runs a 3-node cluster in containers on a private network and
// puts it through a leader crash and restart, a partition of a follower, a
// pause of a follower and a SIGTERM of the leader, checking after each that
// the cluster serves and replays. Then it checks that the run left no
// container, network or volume behind. It runs only with
// CARMY_DOCKER_TESTS=1.
func TestCluster(t *testing.T) {
	dockertest.Require(t)
	var runID string
	t.Run("faults", func(t *testing.T) {
		network := dockertest.NewNetwork(t, "cluster")
		runID = network.RunID()
		t.Logf("run %s: network %s, subnet %s, image %s", runID, network.Name(), network.Subnet(), network.Image())

		n1 := network.Start(t, "n1", "--dev")
		n2 := network.Start(t, "n2", "--dev", "--join", n1.HTTPAddr())
		n3 := network.Start(t, "n3", "--dev", "--join", n1.HTTPAddr())
		all := []*dockertest.Container{n1, n2, n3}
		t.Cleanup(func() {
			if t.Failed() {
				t.Log(describe(network.Containers()))
			}
		})
		leader := waitFormed(t, all)
		t.Logf("formed: leader %s; IPs n1 %s, n2 %s, n3 %s", leader.Name(), n1.IP(), n2.IP(), n3.IP())

		// A call on n2, replayed on n3.
		first := mustCall(t, n2, "smoke-1", false, "")
		mustCall(t, n3, "smoke-1", true, first.ExecutionID)

		// Kill the leader: the other two elect one and serve.
		killed := leader
		if err := killed.Kill(); err != nil {
			t.Fatal(err)
		}
		survivors := others(all, killed)
		newLeader := waitLeader(t, survivors, killed)
		t.Logf("killed %s; new leader %s", killed.Name(), newLeader.Name())
		second := mustCall(t, survivors[0], "smoke-2", false, "")
		mustCall(t, survivors[1], "smoke-1", true, first.ExecutionID)

		// Start it again: it rejoins from its data dir, and its view
		// follows the log.
		if err := killed.Start(); err != nil {
			t.Fatal(err)
		}
		t.Logf("restarted %s: IP %s, %s", killed.Name(), killed.IP(), killed.URL())
		leader = waitFormed(t, all)
		mustCall(t, killed, "smoke-2", true, second.ExecutionID)

		// Cut a follower off: the majority keeps serving and sees it go.
		follower := others(all, leader)[0]
		majority := others(all, follower)
		ip := follower.IP()
		if err := follower.Disconnect(); err != nil {
			t.Fatal(err)
		}
		t.Logf("disconnected %s (%s); leader %s", follower.Name(), ip, leader.Name())
		third := mustCall(t, majority[0], "smoke-3", false, "")
		mustCall(t, majority[1], "smoke-3", true, third.ExecutionID)
		testutil.WaitFor(t, formTimeout, "the majority to see "+follower.Name()+" leave gossip", func() error {
			for _, c := range majority {
				st, err := status(c)
				if err != nil {
					return err
				}
				if m, ok := st.Member(follower.Name()); !ok || m.Gossip == "alive" {
					return fmt.Errorf("%s sees %s as %+v", c.Name(), follower.Name(), m)
				}
			}
			return nil
		})
		// What the majority applied to its state machine by now (FSM
		// entries only: commit_index also counts Raft's own entries).
		var applied uint64
		for _, c := range majority {
			st, err := status(c)
			if err != nil {
				t.Fatal(err)
			}
			applied = max(applied, st.AppliedIndex)
		}

		// Reconnect it: it catches up.
		if err := follower.Connect(); err != nil {
			t.Fatal(err)
		}
		if got := follower.IP(); got != ip {
			t.Errorf("%s came back with IP %s, had %s", follower.Name(), got, ip)
		}
		t.Logf("reconnected %s at %s", follower.Name(), follower.URL())
		testutil.WaitFor(t, formTimeout, follower.Name()+" to catch up", func() error {
			if err := ready(follower); err != nil {
				return err
			}
			mine, err := status(follower)
			if err != nil {
				return err
			}
			theirs, err := status(majority[0])
			if err != nil {
				return err
			}
			switch {
			case mine.LeaderID() == "" || mine.LeaderID() != theirs.LeaderID():
				return fmt.Errorf("%s names leader %q, %s names %q", follower.Name(), mine.LeaderID(), majority[0].Name(), theirs.LeaderID())
			case mine.AppliedIndex < applied:
				return fmt.Errorf("%s applied index %d < %d, what the majority applied during the partition", follower.Name(), mine.AppliedIndex, applied)
			}
			return nil
		})
		leader = waitFormed(t, all)
		mustCall(t, follower, "smoke-3", true, third.ExecutionID)

		// Pause a follower: the others serve; thawed, it is a member again.
		paused := others(all, leader)[0]
		if err := paused.Pause(); err != nil {
			t.Fatal(err)
		}
		fourth := mustCall(t, leader, "smoke-4", false, "")
		if err := paused.Unpause(); err != nil {
			t.Fatal(err)
		}
		waitFormed(t, all)
		mustCall(t, paused, "smoke-4", true, fourth.ExecutionID)

		// SIGTERM the leader: it exits 0 and the others go on.
		if err := leader.Stop(20 * time.Second); err != nil {
			t.Fatal(err)
		}
		rest := others(all, leader)
		waitLeader(t, rest, leader)
		mustCall(t, rest[0], "smoke-4", true, fourth.ExecutionID)

		// A node that refuses to start is an error carrying its output:
		// without --dev or auth tokens it may not listen off loopback.
		if _, err := network.Launch("n4"); err == nil || !strings.Contains(err.Error(), "refusing to start") {
			t.Errorf("a node without auth on a container address started, or failed otherwise: %v", err)
		}
	})

	// The subtest's cleanup has run: nothing of its run may be left.
	if runID == "" {
		return
	}
	left, err := dockertest.Leftovers(runID)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("run %s left %v", runID, left)
	}
}

// others returns cs without c.
func others(cs []*dockertest.Container, c *dockertest.Container) []*dockertest.Container {
	return slices.DeleteFunc(slices.Clone(cs), func(x *dockertest.Container) bool { return x == c })
}

var client = &http.Client{Timeout: 15 * time.Second}

// status asks c for GET /v1/cluster.
func status(c *dockertest.Container) (testutil.ClusterStatus, error) {
	if c.URL() == "" {
		return testutil.ClusterStatus{}, fmt.Errorf("%s: no published port", c.Name())
	}
	st, err := testutil.FetchClusterStatus(context.Background(), c.URL())
	if err != nil {
		return st, fmt.Errorf("%s: %w", c.Name(), err)
	}
	return st, nil
}

// ready is nil when c's GET /readyz answers 200.
func ready(c *dockertest.Container) error {
	if c.URL() == "" {
		return fmt.Errorf("%s: no published port", c.Name())
	}
	if err := testutil.CheckReady(context.Background(), c.URL()); err != nil {
		return fmt.Errorf("%s: %w", c.Name(), err)
	}
	return nil
}

// waitFormed waits until every node of cs is ready and lists len(cs)
// voters, all gossip-alive, with the same leader, and returns the leader.
func waitFormed(t *testing.T, cs []*dockertest.Container) *dockertest.Container {
	t.Helper()
	return waitAgreed(t, cs, fmt.Sprintf("%d ready voters, all alive, with one leader", len(cs)),
		testutil.Agreement{Ready: true, Voters: len(cs)})
}

// waitLeader waits until every node of cs is ready and names the same
// leader, one of cs (not gone), and returns it.
func waitLeader(t *testing.T, cs []*dockertest.Container, gone *dockertest.Container) *dockertest.Container {
	t.Helper()
	return waitAgreed(t, cs, "a new leader the others agree on", testutil.Agreement{Ready: true, NotLeader: gone.Name()})
}

// waitAgreed waits until the nodes of cs agree on a leader as want says,
// and returns it.
func waitAgreed(t *testing.T, cs []*dockertest.Container, what string, want testutil.Agreement) *dockertest.Container {
	t.Helper()
	var leader *dockertest.Container
	testutil.WaitFor(t, formTimeout, what, func() error {
		probes, err := dockertest.Probes(cs)
		if err != nil {
			return err
		}
		id, err := testutil.AgreedLeader(probes, want)
		if err != nil {
			return err
		}
		if leader = byName(cs, id); leader == nil {
			return fmt.Errorf("the leader %q is none of the nodes", id)
		}
		return nil
	})
	return leader
}

func byName(cs []*dockertest.Container, name string) *dockertest.Container {
	for _, c := range cs {
		if c.Name() == name {
			return c
		}
	}
	return nil
}

// callResult is the part of a POST /v1/tools/call answer the test reads.
type callResult struct {
	ExecutionID string          `json:"execution_id"`
	Status      string          `json:"status"`
	Replayed    bool            `json:"replayed"`
	Data        json.RawMessage `json:"data"`
}

// mustCall calls the demo tool create_order with requestID on c and checks
// the answer is 200 completed, a replay of execution wantExec when replay
// is set, a new execution otherwise. Answers that leave the call undone
// (no answer, 503 UNAVAILABLE, and then EXECUTION_UNCERTAIN while an
// unconfirmed reservation awaits its release) are retried with the same
// identity, as an agent would, until formTimeout; after such a retry a new
// call may come back as a replay.
func mustCall(t *testing.T, c *dockertest.Container, requestID string, replay bool, wantExec string) callResult {
	t.Helper()
	var (
		res     callResult
		retried bool
		fatal   error
	)
	testutil.WaitFor(t, formTimeout, c.Name()+" to answer call "+requestID, func() error {
		r, code, err := call(c, requestID)
		switch {
		case err == nil:
			res = r
			return nil
		case code == 0, code == http.StatusServiceUnavailable && strings.Contains(err.Error(), `"UNAVAILABLE"`),
			code == http.StatusConflict && retried && strings.Contains(err.Error(), `"EXECUTION_UNCERTAIN"`):
			t.Logf("retrying: %v", err)
			retried = true
			return err
		default:
			fatal = err
			return nil
		}
	})
	switch {
	case fatal != nil:
		t.Fatal(fatal)
	case res.Status != "completed":
		t.Fatalf("%s: call %s: status %s, want completed", c.Name(), requestID, res.Status)
	case res.Replayed != replay && !(retried && !replay):
		t.Fatalf("%s: call %s: replayed %v, want %v", c.Name(), requestID, res.Replayed, replay)
	case replay && res.ExecutionID != wantExec:
		t.Fatalf("%s: call %s replayed execution %s, want %s", c.Name(), requestID, res.ExecutionID, wantExec)
	case res.ExecutionID == "":
		t.Fatalf("%s: call %s: no execution_id", c.Name(), requestID)
	}
	return res
}

// call sends the call and returns its answer; code is the HTTP status, 0
// when there was no answer.
func call(c *dockertest.Container, requestID string) (res callResult, code int, err error) {
	if c.URL() == "" {
		return res, 0, fmt.Errorf("%s: no published port", c.Name())
	}
	body, _ := json.Marshal(map[string]any{
		"tool": "create_order", "arguments": map[string]string{"sku": "KB-01"}, "request_id": requestID,
	})
	resp, err := client.Post(c.URL()+"/v1/tools/call", "application/json", bytes.NewReader(body))
	if err != nil {
		return res, 0, fmt.Errorf("%s: call %s: %w", c.Name(), requestID, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return res, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return res, resp.StatusCode, fmt.Errorf("%s: call %s: %d %s", c.Name(), requestID, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return res, resp.StatusCode, fmt.Errorf("%s: call %s: %w: %s", c.Name(), requestID, err, raw)
	}
	if replayed := resp.Header.Get("Idempotent-Replayed") == "true"; replayed != res.Replayed {
		return res, resp.StatusCode, errors.New(c.Name() + ": Idempotent-Replayed header disagrees with the body")
	}
	return res, resp.StatusCode, nil
}

// describe returns every container's view of the cluster, for failures.
func describe(cs []*dockertest.Container) string {
	var b bytes.Buffer
	b.WriteString("cluster state:\n")
	for _, c := range cs {
		r := "ready"
		if err := ready(c); err != nil {
			r = err.Error()
		}
		st, err := status(c)
		if err != nil {
			fmt.Fprintf(&b, "  %s (ip %s, %s): %s; %v\n", c.Name(), c.IP(), c.URL(), r, err)
			continue
		}
		raw, _ := json.Marshal(st)
		fmt.Fprintf(&b, "  %s (ip %s, %s): %s; %s\n", c.Name(), c.IP(), c.URL(), r, raw)
	}
	return b.String()
}
