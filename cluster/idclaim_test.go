package cluster_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store"
)

// A node started with the id of a live member (a forgotten --node-id: the
// default id again) asks to join from its own addresses: the join is
// refused, whether the id is a follower's or the leader's, with a message
// naming the id, the member's addresses and how to replace a dead member.
// The member keeps its addresses, the cluster its leader, and a call
// through every node still commits.
func TestJoinWithALiveMembersIDIsRefused(t *testing.T) {
	// Not parallel: asserts the leader did not change.
	c := newCluster(t, 3, nil)
	leader := c.leader()
	fs := c.followers()
	for _, victim := range []*testNode{fs[0], leader} {
		// No --join: it waits to be added, as an operator's join would add it.
		impostor := startNode(t, victim.ID(), t.TempDir(), false, nil, nil)
		_, err := fs[1].AddNode(t.Context(), cluster.NodeInfo{ID: victim.ID(), RaftAddr: impostor.RaftAddr(), HTTPAddr: impostor.HTTPAddr()})
		if !errors.Is(err, store.ErrInvalidState) {
			st, _ := leader.Status(t.Context())
			t.Fatalf("a join with %s's id from new addresses: err = %v, want INVALID_STATE; members now %+v", victim.ID(), err, st.Nodes)
		}
		for _, want := range []string{fmt.Sprintf("%q", victim.ID()), victim.RaftAddr(), victim.HTTPAddr(), impostor.RaftAddr(), "remove it first", "dead"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal %q does not say %q", err, want)
			}
		}
		impostor.stop()
	}
	st, err := leader.Status(t.Context())
	if err != nil || st.LeaderID != leader.ID() {
		t.Fatalf("after the refused joins: leader %q, %v; want %s", st.LeaderID, err, leader.ID())
	}
	for _, n := range c.nodes {
		found := false
		for _, m := range st.Nodes {
			if m.ID == n.ID() {
				found = m.RaftAddr == n.RaftAddr() && m.HTTPAddr == n.HTTPAddr()
			}
		}
		if !found || len(st.Nodes) != 3 {
			t.Fatalf("after the refused joins, %s is not listed at raft %s, http %s: %+v", n.ID(), n.RaftAddr(), n.HTTPAddr(), st.Nodes)
		}
	}
	for i, n := range c.nodes {
		mustReserve(t, n.Store(), key(fmt.Sprintf("after-refusal-%d", i)), exec(n.ID()), store.Reserved)
	}
}
