package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

func TestElectionAndForwarding(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	leader := c.leader()
	for _, f := range c.followers() {
		if id, addr := f.Leader(); id != leader.ID() || addr != leader.HTTPAddr() {
			t.Fatalf("%s sees leader %s at %s, want %s at %s", f.ID(), id, addr, leader.ID(), leader.HTTPAddr())
		}
	}
	// A write on a follower is forwarded; its result comes back through
	// the log, and the other nodes see it after a read barrier.
	f := c.followers()[0]
	ex := exec(f.ID())
	rec := mustReserve(t, f.Store(), key("fwd"), ex, store.Reserved)
	if rec.Seq == 0 || rec.ExecutionID != ex.ID {
		t.Fatalf("forwarded reservation = %+v", rec)
	}
	if _, err := f.Store().Complete(t.Context(), key("fwd"), "fp", completed(ex.ID)); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		got, err := n.Store().Lookup(t.Context(), key("fwd"))
		if err != nil || got.Status != store.StatusCompleted {
			t.Fatalf("%s: Lookup = %+v, %v", n.ID(), got, err)
		}
		// A replay through any node, with no Raft round trip needed.
		again := mustReserve(t, n.Store(), key("fwd"), exec(n.ID()), store.Replay)
		if again.ExecutionID != ex.ID {
			t.Fatalf("%s replayed %s, want %s", n.ID(), again.ExecutionID, ex.ID)
		}
	}
}

func TestCapacityIsClusterWide(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, func(cfg *cluster.Config) { cfg.MaxEntries = 4 })
	waitCapacity(t, c, 4)
	for i, n := range c.nodes {
		mustReserve(t, n.Store(), key(fmt.Sprint("cap-", i)), exec(n.ID()), store.Reserved)
	}
	mustReserve(t, c.nodes[0].Store(), key("cap-3"), exec("n1"), store.Reserved)
	for _, n := range c.nodes {
		_, err := n.Store().Reserve(t.Context(), key("cap-"+n.ID()), "fp", exec(n.ID()))
		if !errors.Is(err, store.ErrCapacity) {
			t.Fatalf("%s: a fifth reservation: %v, want ErrCapacity", n.ID(), err)
		}
	}
}

func TestConcurrentWritesShareRounds(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	f := c.followers()[0]
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := c.nodes[i%3].Store()
			if _, err := s.Reserve(context.Background(), key(fmt.Sprint("c-", i)), "fp", exec(f.ID())); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent reserve: %v", err)
	}
	st, _ := c.leader().Store().Stats(t.Context())
	if st.Entries != 200 {
		t.Fatalf("entries = %d, want 200", st.Entries)
	}
}

func TestLeaderLossKeepsServing(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	old := c.leader()
	f := c.followers()[0]
	ex := exec(f.ID())
	mustReserve(t, f.Store(), key("before"), ex, store.Reserved)
	if _, err := f.Store().Complete(t.Context(), key("before"), "fp", completed(ex.ID)); err != nil {
		t.Fatal(err)
	}
	old.stop()
	// A write during the election waits for the new leader (or answers
	// UNAVAILABLE, never a wrong answer).
	testutil.WaitUntil(t, 30*time.Second, "a write through the survivors", func() bool {
		_, err := f.Store().Reserve(t.Context(), key("after"), "fp", exec(f.ID()))
		if err != nil && !isUnavailable(err) {
			t.Fatalf("reserve during election: %v", err)
		}
		return err == nil
	})
	if nl := c.leader(); nl == old {
		t.Fatal("the stopped node still leads")
	}
	for _, n := range c.followers() {
		mustReserve(t, n.Store(), key("before"), exec(n.ID()), store.Replay)
		// "after" may have been reserved by an earlier attempt whose answer
		// was lost: then it reads as uncertain, never reserved twice.
		res, err := n.Store().Reserve(t.Context(), key("after"), "fp", exec(n.ID()))
		if err != nil || res.Outcome == store.Reserved {
			t.Fatalf("%s: after = %v, %v", n.ID(), res.Outcome, err)
		}
	}
}

func TestNoQuorumFailsClosed(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, func(cfg *cluster.Config) { cfg.LeaderWait = 1500 * time.Millisecond })
	survivor := c.followers()[0]
	for _, n := range c.nodes {
		if n != survivor {
			n.stop()
		}
	}
	testutil.WaitUntil(t, 30*time.Second, "the survivor to lose its leader", func() bool {
		_, err := survivor.Store().Reserve(t.Context(), key("alone"), "fp", exec(survivor.ID()))
		if err == nil {
			t.Fatal("a node without quorum reserved")
		}
		return errors.Is(err, store.ErrUnavailable)
	})
	// Unavailable writes may come before Raft's own timeout drops the
	// dead leader (on a loaded machine); then readiness must follow.
	testutil.WaitUntil(t, 30*time.Second, "the survivor to say it is not ready", func() bool {
		return survivor.Ready(t.Context()) != nil
	})
}

func TestSnapshotInstallToLaggingNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, func(cfg *cluster.Config) {
		cfg.SnapshotThreshold = 64
		cfg.SnapshotInterval = 100 * time.Millisecond
	})
	lag := c.followers()[0]
	lag.stop()
	leader := c.leader()
	for i := range 400 {
		mustReserve(t, leader.Store(), key(fmt.Sprint("s-", i)), exec(leader.ID()), store.Reserved)
	}
	testutil.WaitUntil(t, 30*time.Second, "the leader to snapshot and compact", func() bool {
		return leader.Raft().Stats()["last_snapshot_index"] != "0"
	})
	// Restart the lagging node on its data dir: it must catch up from a
	// snapshot, since the entries it misses are compacted away.
	back := startNode(t, lag.cfg.NodeID, lag.cfg.DataDir, false, nil, func(cfg *cluster.Config) {
		cfg.SnapshotThreshold = 64
		cfg.SnapshotInterval = 100 * time.Millisecond
	})
	c.mu.Lock()
	c.nodes = append(c.nodes, back)
	c.mu.Unlock()
	// Its addresses changed with the restart; the member table learns them.
	if _, err := leader.AddNode(t.Context(), back.Info()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, 30*time.Second, "the restarted node to catch up", func() bool {
		return back.FSM().Stats().Entries == 400
	})
	h1, _ := leader.FSM().Hash()
	testutil.WaitUntil(t, 30*time.Second, "equal state hashes", func() bool {
		h2, _ := back.FSM().Hash()
		h1, _ = leader.FSM().Hash()
		return h1 == h2
	})
	if err := back.ReadBarrier(t.Context()); err != nil {
		t.Fatalf("read barrier on the node that installed a snapshot: %v", err)
	}
	mustReserve(t, back.Store(), key("s-7"), exec(back.ID()), store.Uncertain)
	// The snapshot it installed is as private as one it took (finding 7).
	testutil.AssertPrivate(t, back.cfg.DataDir)
}

func TestMembership(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, nil)
	third := startNode(t, "n3", t.TempDir(), false, nil, nil)
	c.mu.Lock()
	c.nodes = append(c.nodes, third)
	c.mu.Unlock()
	f := c.followers()[0]
	// Added through a follower, which forwards to the leader.
	nodes, err := f.AddNode(t.Context(), cluster.NodeInfo{ID: "n3", RaftAddr: third.RaftAddr(), HTTPAddr: third.HTTPAddr()})
	if err != nil {
		t.Fatalf("AddNode: %v", err)
	}
	if len(nodes) < 3 {
		t.Fatalf("member table after add: %+v", nodes)
	}
	c.waitReady()
	// The same again is a no-op.
	if _, err := c.leader().AddNode(t.Context(), cluster.NodeInfo{ID: "n3", RaftAddr: third.RaftAddr(), HTTPAddr: third.HTTPAddr()}); err != nil {
		t.Fatalf("AddNode again: %v", err)
	}
	st, err := f.Status(t.Context())
	if err != nil || len(st.Nodes) != 3 || st.LeaderID == "" {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	testutil.WaitUntil(t, 30*time.Second, "gossip to see every member alive", func() bool {
		for _, on := range []*testNode{third, c.leader()} {
			st, _ := on.Status(t.Context())
			for _, n := range st.Nodes {
				if n.Gossip != cluster.GossipAlive || n.HTTPAddr == "" {
					return false
				}
			}
			if len(st.Nodes) != 3 {
				return false
			}
		}
		return true
	})
	_, err = f.AddNode(t.Context(), cluster.NodeInfo{ID: "bad"})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("AddNode without addresses: %v", err)
	}
	// Another id on a live member's Raft address is refused: evicting n3
	// would leave whoever owns the address answering for two ids.
	_, err = f.AddNode(t.Context(), cluster.NodeInfo{ID: "impostor", RaftAddr: third.RaftAddr(), HTTPAddr: "127.0.0.1:1"})
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "belongs to member n3") {
		st, _ := c.leader().Status(t.Context())
		t.Fatalf("AddNode on a live member's address: %v; nodes now %+v", err, st.Nodes)
	}
	if st, _ := c.leader().Status(t.Context()); len(st.Nodes) != 3 {
		t.Fatalf("the refused join changed the configuration: %+v", st.Nodes)
	}

	// A running execution of the removed node becomes interrupted.
	ex := exec("n3")
	mustReserve(t, third.Store(), key("on-n3"), ex, store.Reserved)
	if err := f.RemoveNode(t.Context(), "n3"); err != nil {
		t.Fatalf("RemoveNode: %v", err)
	}
	st, _ = c.leader().Status(t.Context())
	for _, n := range st.Nodes {
		if n.ID == "n3" {
			t.Fatalf("n3 still listed after removal: %+v", st.Nodes)
		}
	}
	rec, err := c.leader().Store().Get(t.Context(), ex.ID)
	if err != nil || rec.Status != store.StatusInterrupted {
		t.Fatalf("removed node's execution = %+v, %v", rec, err)
	}
	if !c.leader().RunnerGone("n3") {
		t.Fatal("a removed node's runner is not gone")
	}
	// The removed node still runs, but it is no longer ready: it hears of
	// no commit, so what it would serve goes stale.
	testutil.WaitUntil(t, 30*time.Second, "the removed node to say it is not ready", func() bool {
		return third.Ready(t.Context()) != nil
	})
	for _, n := range []*testNode{c.leader(), c.followers()[0]} {
		err := n.RemoveNode(t.Context(), "nope")
		if !errors.Is(err, store.ErrNotFound) || store.CodeOf(err) != "NOT_FOUND" || err.Error() != `no member "nope"` {
			t.Fatalf("RemoveNode(unknown) on %s = %v", n.ID(), err)
		}
	}
}

func TestDeadNodeExecutionsBecomeInterrupted(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	victim := c.followers()[0]
	ex := exec(victim.ID())
	mustReserve(t, victim.Store(), key("dies"), ex, store.Reserved)
	victim.stop()
	leader := c.leader()
	testutil.WaitUntil(t, 30*time.Second, "the dead node's execution to become interrupted", func() bool {
		rec, err := leader.Store().Get(t.Context(), ex.ID)
		return err == nil && rec.Status == store.StatusInterrupted
	})
	if !leader.RunnerGone(victim.ID()) {
		t.Fatal("gossip-dead node's runner is not gone")
	}
	// A late completion from the original runner is still recorded.
	if _, err := leader.Store().Complete(t.Context(), key("dies"), "fp", completed(ex.ID)); err != nil {
		t.Fatalf("late completion: %v", err)
	}
}

func TestCancelIsDeliveredToTheRunner(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	runner := c.followers()[0]
	got := make(chan string, 1)
	runner.OnCancel(func(id string) { got <- id })
	ex := exec(runner.ID())
	mustReserve(t, runner.Store(), key("cancel-me"), ex, store.Reserved)
	other := c.leader()
	res := store.Result{ExecutionID: ex.ID, Status: store.StatusCancelled, FinishedAt: time.Now().UTC(), Error: []byte(`{"code":"CANCELLED","message":"x"}`)}
	if _, err := other.Store().Cancel(t.Context(), ex.ID, res); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-got:
		if id != ex.ID {
			t.Fatalf("runner told of %s, want %s", id, ex.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the runner was not told of the cancel")
	}
}

func TestPeerEndpointsNeedTheClusterKey(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, func(cfg *cluster.Config) { cfg.ClusterKey, cfg.TLS = "s3cret-s3cret-s3cret", nil })
	n := c.nodes[0]
	for _, path := range []string{"/internal/v1/join", "/internal/v1/remove", "/internal/v1/readindex",
		"/internal/v1/silence", "/internal/v1/stream"} {
		for _, k := range []string{"", "wrong"} {
			req, _ := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+path, bytes.NewReader([]byte(`{"id":"n1","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`)))
			if k != "" {
				req.Header.Set("Carmy-Cluster-Key", k)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("%s with key %q: status %d, want 403", path, k, resp.StatusCode)
			}
		}
	}
	if st, _ := n.Status(t.Context()); len(st.Nodes) != 1 || st.Nodes[0].RaftAddr != n.RaftAddr() {
		t.Fatalf("refused calls changed the configuration: %+v", st.Nodes)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+"/internal/v1/readindex", bytes.NewReader([]byte(`{}`)))
	req.Header.Set("Carmy-Cluster-Key", "s3cret-s3cret-s3cret")
	req.Header.Set(peer.ProtocolHeader, peer.Protocol)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with the key: status %d", resp.StatusCode)
	}
}

func TestConfigValidate(t *testing.T) {
	base := cluster.Config{NodeID: "n", DataDir: "d", RaftAddr: "127.0.0.1:1", GossipAddr: "127.0.0.1:2", HTTPAddr: "127.0.0.1:3",
		ClusterKey: "0123456789abcdef"}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	// Node-to-node calls are never trusted for their address: without
	// a key or node TLS, even an all-loopback node is refused.
	for _, addr := range []string{"127.0.0.1:3", "0.0.0.0:3"} {
		keyless := base
		keyless.HTTPAddr, keyless.ClusterKey = addr, ""
		if err := keyless.Validate(); err == nil || !strings.Contains(err.Error(), "cluster key or node TLS") {
			t.Fatalf("a node on %s without a cluster key or node TLS: %v", addr, err)
		}
	}
	short := base
	short.ClusterKey = "0123456789abcde" // 15 bytes
	if err := short.Validate(); err == nil {
		t.Fatal("a 15-byte cluster key was accepted")
	}
	open := base
	open.HTTPAddr = "0.0.0.0:3"
	if err := open.Validate(); err != nil {
		t.Fatal(err)
	}
	// Node TLS authenticates the nodes instead of the key.
	withTLS := open
	withTLS.ClusterKey = ""
	withTLS.TLS = &cluster.NodeTLS{CAFile: "ca.pem", CertFile: "n.pem", KeyFile: "n-key.pem"}
	if err := withTLS.Validate(); err != nil {
		t.Fatalf("node TLS without a cluster key off loopback: %v", err)
	}
	for _, bad := range []func(*cluster.Config){
		func(c *cluster.Config) { c.NodeID = "" },
		func(c *cluster.Config) { c.DataDir = "" },
		func(c *cluster.Config) { c.RaftAddr = "nope" },
		func(c *cluster.Config) { c.Retention = -1 },
	} {
		c := base
		bad(&c)
		if err := c.Validate(); err == nil {
			t.Fatalf("accepted %+v", c)
		}
	}
}

// Raft keeps no-op and barrier entries from the FSM; readiness and read
// barriers must not wait for the FSM to reach their indexes.
func TestReadyAfterLeaderChangeWithoutWrites(t *testing.T) {
	t.Parallel()
	// No dead-node interruption either: nothing but Raft's own entries
	// follows the election.
	c := newCluster(t, 3, func(cfg *cluster.Config) { cfg.DeadGrace = time.Hour })
	old := c.leader()
	old.stop()
	nl := c.leader()
	if nl == old {
		t.Fatal("the stopped node still leads")
	}
	testutil.WaitUntil(t, 20*time.Second, "the survivors to be ready with no write after the election", func() bool {
		for _, n := range c.nodes {
			if n != old && n.Ready(t.Context()) != nil {
				return false
			}
		}
		return true
	})
	for _, n := range c.nodes {
		if n == old {
			continue
		}
		if err := n.ReadBarrier(t.Context()); err != nil {
			t.Fatalf("%s: read barrier after the election: %v", n.ID(), err)
		}
	}
}

func TestRestartOnNewAddressRejoins(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	f := c.followers()[0]
	ex := exec(f.ID())
	mustReserve(t, f.Store(), key("before-move"), ex, store.Reserved)
	f.stop()
	// Same id and data dir; new ports for Raft, gossip and HTTP.
	back := startNode(t, f.cfg.NodeID, f.cfg.DataDir, false, nil, nil)
	c.mu.Lock()
	c.nodes = append(c.nodes, back)
	c.mu.Unlock()
	leader := c.leader()
	testutil.WaitUntil(t, 30*time.Second, "the leader to list the node's new Raft address", func() bool {
		st, err := leader.Status(t.Context())
		if err != nil {
			return false
		}
		for _, n := range st.Nodes {
			if n.ID == back.ID() {
				return n.RaftAddr == back.RaftAddr() && n.HTTPAddr == back.HTTPAddr()
			}
		}
		return false
	})
	testutil.WaitUntil(t, 30*time.Second, "the moved node to be ready", func() bool { return back.Ready(t.Context()) == nil })
	if rec, err := back.Store().Lookup(t.Context(), key("before-move")); err != nil || rec.ExecutionID != ex.ID {
		t.Fatalf("moved node's lookup = %+v, %v", rec, err)
	}
}

// Reservations in flight when the leader stops are either committed,
// refused, or answered as unknown; none is ever reserved twice.
func TestLeaderLossDuringReserves(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	old := c.leader()
	f := c.followers()[0]
	type result struct {
		k   store.Key
		ex  store.Execution
		out store.Outcome
		err error
	}
	results := make(chan result, 300)
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, ex := key(fmt.Sprint("inflight-", i)), exec(f.ID())
			res, err := f.Store().Reserve(context.Background(), k, "fp", ex)
			results <- result{k, ex, res.Outcome, err}
		}()
		if i == 100 {
			go old.stop()
		}
	}
	wg.Wait()
	close(results)
	unknown := 0
	for r := range results {
		switch {
		case r.err == nil && r.out == store.Reserved:
			// Committed: a second reservation must not win.
			res, err := f.Store().Reserve(t.Context(), r.k, "fp", exec(f.ID()))
			if err == nil && res.Outcome == store.Reserved {
				t.Fatalf("%s reserved twice", r.k)
			}
		case r.err == nil:
			t.Fatalf("%s: unexpected outcome %v", r.k, r.out)
		case errors.Is(r.err, store.ErrCommitUnknown):
			unknown++
			// The proposer finds out by its execution id: either it holds
			// the reservation or nobody does.
			testutil.WaitUntil(t, 30*time.Second, "a leader to answer for "+r.k.String(), func() bool {
				rec, err := f.Store().Lookup(t.Context(), r.k)
				if errors.Is(err, store.ErrNotFound) {
					return true
				}
				if err != nil {
					return false
				}
				if rec.ExecutionID != r.ex.ID {
					t.Fatalf("%s is held by %s, not by its only proposer %s", r.k, rec.ExecutionID, r.ex.ID)
				}
				return true
			})
		case errors.Is(r.err, store.ErrUnavailable):
			// Not applied: the identity is vacant.
			testutil.WaitUntil(t, 30*time.Second, "a leader to answer for "+r.k.String(), func() bool {
				_, err := f.Store().Lookup(t.Context(), r.k)
				if err == nil {
					t.Fatalf("%s: UNAVAILABLE, but the reservation exists", r.k)
				}
				return errors.Is(err, store.ErrNotFound)
			})
		default:
			t.Fatalf("%s: %v", r.k, r.err)
		}
	}
	t.Logf("reservations with an unknown outcome: %d of 300", unknown)
}

// A follower asked to check the leader's silence while it hears the
// leader (as watchSilence never does, but another voter cut off from the
// leader may) changes nothing: Raft's own check refuses a silence shorter
// than the heartbeat timeout, so there is no election, no new term, the
// same leader. Asked over the peer endpoint, it answers its log
// position.
func TestSilenceCheckSparesALiveLeader(t *testing.T) {
	// Not parallel: asserts the same leader and term after the checks.
	const clusterKey = "s3cret-s3cret-s3cret"
	c := newCluster(t, 3, func(cfg *cluster.Config) { cfg.ClusterKey, cfg.TLS = clusterKey, nil })
	leader := c.leader()
	term := leader.Raft().Stats()["term"]
	for _, f := range c.followers() {
		for range 5 {
			f.CheckSilence()
		}
		req, _ := http.NewRequest(http.MethodPost, "http://"+f.HTTPAddr()+"/internal/v1/silence", strings.NewReader(`{"check":true}`))
		req.Header.Set("Carmy-Cluster-Key", clusterKey)
		req.Header.Set(peer.ProtocolHeader, peer.Protocol)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var pos struct {
			LastTerm  uint64 `json:"last_term"`
			LastIndex uint64 `json:"last_index"`
		}
		err = json.NewDecoder(resp.Body).Decode(&pos)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || pos.LastTerm == 0 || pos.LastIndex == 0 {
			t.Fatalf("%s: status %d, position %+v, %v", f.ID(), resp.StatusCode, pos, err)
		}
	}
	mustReserve(t, c.followers()[0].Store(), key("after-checks"), exec(c.followers()[0].ID()), store.Reserved)
	if nl := c.leader(); nl != leader {
		t.Fatalf("leader %s after the checks, want %s", nl.ID(), leader.ID())
	}
	if got := leader.Raft().Stats()["term"]; got != term {
		t.Fatalf("term %s after the checks, want %s", got, term)
	}
}

// TestRemovedNodeLateReservationsBecomeInterrupted: a removal marks the
// executions the removed node holds then; a reservation of that node
// accepted after it (the node still took calls until it was stopped, and
// forwarded them) is marked interrupted by the leader too, rather than
// left running for ever. (Found by TestLedgerUnderFaults in cmd/carmy.)
func TestRemovedNodeLateReservationsBecomeInterrupted(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	leader := c.leader()
	removed := c.followers()[0]
	if err := leader.RemoveNode(t.Context(), removed.ID()); err != nil {
		t.Fatalf("RemoveNode: %v", err)
	}
	// What the removed node's forwarded reservation is to the leader.
	ex := exec(removed.ID())
	mustReserve(t, leader.Store(), key("late-on-removed"), ex, store.Reserved)
	removed.stop()
	testutil.WaitUntil(t, 30*time.Second, "the removed node's late execution to become interrupted", func() bool {
		rec, err := c.leader().Store().Get(t.Context(), ex.ID)
		return err == nil && rec.Status == store.StatusInterrupted
	})
	// A late completion from the removed runner is still recorded.
	if _, err := c.leader().Store().Complete(t.Context(), key("late-on-removed"), "fp", completed(ex.ID)); err != nil {
		t.Fatalf("late completion: %v", err)
	}
}
