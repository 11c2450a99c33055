package cluster_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

// holdableLog is a node's durable log store whose writes can be held: a
// held write waits until released.
type holdableLog struct {
	raft.LogStore
	held    atomic.Bool
	mu      sync.Mutex
	release chan struct{}
	waiting atomic.Int32 // writes waiting now
}

func newHoldableLog(s raft.LogStore) *holdableLog {
	return &holdableLog{LogStore: s, release: make(chan struct{})}
}

func (h *holdableLog) StoreLog(l *raft.Log) error { return h.StoreLogs([]*raft.Log{l}) }

func (h *holdableLog) StoreLogs(logs []*raft.Log) error {
	if h.held.Load() {
		h.mu.Lock()
		ch := h.release
		h.mu.Unlock()
		h.waiting.Add(1)
		<-ch
		h.waiting.Add(-1)
	}
	return h.LogStore.StoreLogs(logs)
}

func (h *holdableLog) hold() { h.held.Store(true) }

func (h *holdableLog) unhold() {
	h.held.Store(false)
	h.mu.Lock()
	close(h.release)
	h.release = make(chan struct{})
	h.mu.Unlock()
}

// TestLeaderWritesWhileFollowersWrite checks, on a real 3-node cluster,
// that the leader's log write no longer comes before replication, and
// that what this changes is never seen: while the leader's own write of a
// reservation is held, both followers store the entry (Raft sent it
// without waiting), but no node applies it, no follower hears it is
// committed and the caller has no answer; once the write is released the
// caller is answered and every node applies it.
func TestLeaderWritesWhileFollowersWrite(t *testing.T) {
	// Not parallel: an election while the leader's write is held would commit the entry.
	logs := map[string]*holdableLog{}
	var mu sync.Mutex
	c := newCluster(t, 3, func(cfg *cluster.Config) {
		id := cfg.NodeID
		cfg.Hooks.LogStore = func(s raft.LogStore) raft.LogStore {
			h := newHoldableLog(s)
			mu.Lock()
			logs[id] = h
			mu.Unlock()
			return h
		}
	})
	leader := c.leader()
	followers := c.followers()
	ctx := context.Background()
	// One call first, so every node has applied everything before.
	mustReserve(t, leader.Store(), key("before"), exec(leader.ID()), store.Reserved)
	testutil.WaitUntil(t, 10*time.Second, "every node to apply the first call", func() bool {
		for _, n := range c.nodes {
			if n.FSM().AppliedIndex() != leader.FSM().AppliedIndex() {
				return false
			}
		}
		return true
	})
	applied := leader.FSM().AppliedIndex()
	last := leader.Raft().LastIndex()

	held := logs[leader.ID()]
	held.hold()
	answered := make(chan error, 1)
	go func() {
		_, err := leader.Store().Reserve(ctx, key("held"), "fp", exec(leader.ID()))
		answered <- err
	}()
	// The followers get the entry and store it while the leader's own
	// write waits.
	testutil.WaitUntil(t, 10*time.Second, "the leader's write to be held", func() bool { return held.waiting.Load() > 0 })
	testutil.WaitUntil(t, 10*time.Second, "both followers to store the new entry", func() bool {
		for _, f := range followers {
			if f.Raft().LastIndex() <= last {
				return false
			}
		}
		return true
	})
	// Raft has what it needs for a quorum (itself, not yet on disk, and
	// two followers), yet nothing is applied or answered. Heartbeats and
	// commit-index updates keep flowing meanwhile: give them a few of
	// Raft's CommitTimeout rounds (5 ms) to show a leak.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		for _, n := range c.nodes {
			if got := n.FSM().AppliedIndex(); got != applied {
				t.Fatalf("%s applied index %d while the leader's write of it was held (want %d)", n.ID(), got, applied)
			}
		}
		for _, f := range followers {
			if ci := f.Raft().CommitIndex(); ci > last {
				t.Fatalf("%s heard commit index %d, past %d, while the leader's write was held", f.ID(), ci, last)
			}
		}
		select {
		case err := <-answered:
			t.Fatalf("the reservation was answered (%v) before the leader's write", err)
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}

	held.unhold()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("Reserve after the release: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reservation was not answered after the leader's write was released")
	}
	testutil.WaitUntil(t, 10*time.Second, "every node to apply the held entry", func() bool {
		for _, n := range c.nodes {
			if n.FSM().AppliedIndex() <= applied {
				return false
			}
		}
		return true
	})
	for _, n := range c.nodes {
		if _, err := n.FSM().Lookup(key("held")); err != nil {
			t.Fatalf("%s does not hold the reservation: %v", n.ID(), err)
		}
	}
}
