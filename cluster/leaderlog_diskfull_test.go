package cluster_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// fullDisk is a node's durable log store whose disk can fill: while full,
// every append and truncation fails as BoltDB's do on a full file system.
type fullDisk struct {
	raft.LogStore
	full atomic.Bool
}

var errNoSpace = &fs.PathError{Op: "write", Path: "raft.db", Err: syscall.ENOSPC}

func (d *fullDisk) StoreLog(l *raft.Log) error { return d.StoreLogs([]*raft.Log{l}) }

func (d *fullDisk) StoreLogs(logs []*raft.Log) error {
	if d.full.Load() {
		return errNoSpace
	}
	return d.LogStore.StoreLogs(logs)
}

func (d *fullDisk) DeleteRange(min, max uint64) error {
	if d.full.Load() {
		return errNoSpace
	}
	return d.LogStore.DeleteRange(min, max)
}

// fullDisks gives every node of a test cluster a fullDisk.
func fullDisks() (map[string]*fullDisk, func(*cluster.Config)) {
	var mu sync.Mutex
	disks := map[string]*fullDisk{}
	return disks, func(cfg *cluster.Config) {
		id := cfg.NodeID
		cfg.Hooks.LogStore = func(s raft.LogStore) raft.LogStore {
			d := &fullDisk{LogStore: s}
			mu.Lock()
			disks[id] = d
			mu.Unlock()
			return d
		}
	}
}

// TestFullDiskOnASingleNode checks docs/operations.md#a-full-disk on a real single-node Raft:
// when its log cannot be written for want of space the node stays up and
// keeps leading, refuses new reservations (UNAVAILABLE, before anything
// is reserved), still answers what it recorded, holds a completion until
// there is room, and takes reservations again once there is, with nothing
// acknowledged lost.
func TestFullDiskOnASingleNode(t *testing.T) {
	t.Parallel()
	disks, tune := fullDisks()
	c := newCluster(t, 1, tune)
	n := c.leader()
	st := n.Store()
	ctx := context.Background()
	before := mustReserve(t, st, key("before"), exec(n.ID()), store.Reserved)
	if _, err := st.Complete(ctx, key("before"), "fp", completed(before.ExecutionID)); err != nil {
		t.Fatal(err)
	}
	running := mustReserve(t, st, key("running"), exec(n.ID()), store.Reserved)

	disks[n.ID()].full.Store(true)
	// The first write to fail is the one that finds the disk full: a
	// completion, which waits for room rather than be refused.
	completion := make(chan error, 1)
	go func() {
		_, err := st.Complete(ctx, key("running"), "fp", completed(running.ExecutionID))
		completion <- err
	}()
	testutil.WaitUntil(t, 10*time.Second, "the node to see its disk full", func() bool {
		err := n.Ready(ctx)
		return err != nil && strings.Contains(err.Error(), "disk is full")
	})
	_, err := st.Reserve(ctx, key("during"), "fp", exec(n.ID()))
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrCommitUnknown) || !strings.Contains(err.Error(), "did not run") {
		t.Fatalf("Reserve on a full disk = %v, want UNAVAILABLE before reserving, saying the tool did not run", err)
	}
	if !n.IsLeader() {
		t.Fatal("a single node stopped leading on a full disk")
	}
	if rec, err := st.Lookup(ctx, key("before")); err != nil || rec.ExecutionID != before.ExecutionID || !rec.Status.Finished() {
		t.Fatalf("Lookup of a recorded call on a full disk = %+v, %v", rec, err)
	}
	select {
	case err := <-completion:
		t.Fatalf("the completion was answered (%v) while the disk was full", err)
	default:
	}

	disks[n.ID()].full.Store(false)
	room := time.Now()
	select {
	case err := <-completion:
		if err != nil {
			t.Fatalf("the completion after room came back: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the completion was not answered after room came back")
	}
	testutil.WaitUntil(t, 10*time.Second, "a reservation to succeed again", func() bool {
		_, err := st.Reserve(ctx, key("after"), "fp", exec(n.ID()))
		return err == nil
	})
	t.Logf("reservations again %s after room came back", time.Since(room).Round(time.Millisecond))
	for _, k := range []string{"before", "running"} {
		if rec, err := st.Lookup(ctx, key(k)); err != nil || !rec.Status.Finished() {
			t.Fatalf("Lookup(%s) after the fault = %+v, %v", k, rec, err)
		}
	}
	if err := n.Ready(ctx); err != nil {
		t.Fatalf("not ready after room came back: %v", err)
	}
}

// TestFullDiskLeaderHandsOver checks on a real 3-node cluster that a
// leader whose disk fills hands leadership to another node, which takes
// writes while the old leader's disk stays full (it forwards them), and
// that the old leader catches up once there is room.
func TestFullDiskLeaderHandsOver(t *testing.T) {
	t.Parallel()
	disks, tune := fullDisks()
	c := newCluster(t, 3, tune)
	old := c.leader()
	ctx := context.Background()
	mustReserve(t, old.Store(), key("before"), exec(old.ID()), store.Reserved)

	disks[old.ID()].full.Store(true)
	// A write finds the disk full (its outcome may be unknown: the
	// leader changes under it).
	go func() { _, _ = old.Store().Reserve(ctx, key("finds-it-full"), "fp", exec(old.ID())) }()
	testutil.WaitUntil(t, 30*time.Second, "another node to lead", func() bool {
		l := c.leader()
		return l != old
	})
	// Writes through the node with the full disk reach the new leader.
	testutil.WaitUntil(t, 15*time.Second, "a write through the old leader to succeed", func() bool {
		_, err := old.Store().Reserve(ctx, key("during"), "fp", exec(old.ID()))
		return err == nil
	})
	disks[old.ID()].full.Store(false)
	leader := c.leader()
	testutil.WaitUntil(t, 30*time.Second, "the old leader to catch up", func() bool {
		return old.FSM().AppliedIndex() >= leader.FSM().AppliedIndex()
	})
	for _, k := range []string{"before", "during"} {
		if _, err := old.FSM().Lookup(key(k)); err != nil {
			t.Fatalf("the old leader does not hold %s: %v", k, err)
		}
	}
}

// diskFullAnswerWithin bounds how long a reservation whose log entry met a
// full disk on the leader waits for its answer (docs/operations.md).
const diskFullAnswerWithin = 2 * time.Second

// TestDiskFullAnswersTheReservationThatMetIt checks on real Rafts that the
// reservation whose log entry is the one the leader's full disk failed,
// proposed on the leader or forwarded to it, is answered within
// diskFullAnswerWithin that its outcome is unknown (it may still commit:
// followers hold it, and the leader writes it once there is room), not
// after the write's deadline; and that once there is room the node that
// made it can release it (as its runtime does), so the identity is
// vacant, not running, and a retry reserves it afresh.
func TestDiskFullAnswersTheReservationThatMetIt(t *testing.T) {
	// Not parallel: asserts an answer within diskFullAnswerWithin.
	for _, tc := range []struct {
		name      string
		size      int
		forwarded bool
	}{
		{"single node", 1, false},
		{"three nodes, on the leader", 3, false},
		{"three nodes, forwarded", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disks, tune := fullDisks()
			c := newCluster(t, tc.size, tune)
			leader := c.leader()
			n := leader
			if tc.forwarded {
				n = c.followers()[0]
			}
			ctx := context.Background()
			mustReserve(t, n.Store(), key("before"), exec(n.ID()), store.Reserved)
			testutil.WaitUntil(t, 10*time.Second, "every node to apply what the leader did", func() bool {
				for _, m := range c.nodes {
					if m.FSM().AppliedIndex() < leader.FSM().AppliedIndex() {
						return false
					}
				}
				return true
			})

			disks[leader.ID()].full.Store(true)
			met := exec(n.ID())
			start := time.Now()
			_, err := n.Store().Reserve(ctx, key("met"), "fp", met)
			took := time.Since(start)
			t.Logf("the reservation that met the full disk was answered after %s: %v", took.Round(time.Millisecond), err)
			if !errors.Is(err, store.ErrCommitUnknown) {
				t.Fatalf("the reservation that met the full disk: %v, want its outcome unknown", err)
			}
			if took > diskFullAnswerWithin {
				t.Fatalf("the reservation that met the full disk was answered after %s, want within %s", took.Round(time.Millisecond), diskFullAnswerWithin)
			}

			disks[leader.ID()].full.Store(false)
			// What the runtime does with an unknown reservation: release
			// it, until it is released or found never made.
			var released error
			testutil.WaitUntil(t, 15*time.Second, "the reservation to be released or found never made", func() bool {
				_, released = n.Store().Release(ctx, met.ID, true)
				return released == nil || errors.Is(released, store.ErrNotFound)
			})
			t.Logf("its release once there was room: %v (nil: it had committed)", released)
			if rec, err := n.Store().Lookup(ctx, key("met")); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("the identity after its release: %+v, %v; want none", rec, err)
			}
			mustReserve(t, n.Store(), key("met"), exec(n.ID()), store.Reserved)
		})
	}
}
