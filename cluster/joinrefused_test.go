package cluster_test

import (
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// The joining side of a refused id: a node started with --join and a live
// member's id gives up (Failed), saying why, rather than retry for ever
// (carmy serve then exits non-zero). Once that member is dead, a new node
// may take its id: the member's entry moves to the new addresses.
func TestJoinerWithATakenIDGivesUpUntilTheMemberIsDead(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	leader := c.leader()
	victim, via := c.followers()[0], c.followers()[1]
	impostor := startNode(t, victim.ID(), t.TempDir(), false, []string{via.HTTPAddr()}, nil)
	wait.Until(t, 30*time.Second, "the joiner with a live member's id to give up", func() bool { return impostor.Failure() != nil })
	if msg := impostor.Failure().Error(); !strings.Contains(msg, `"`+victim.ID()+`"`) || !strings.Contains(msg, victim.RaftAddr()) {
		t.Errorf("the joiner's failure %q names neither the id nor the member's address", msg)
	}
	impostor.stop()

	victim.stop()
	wait.Until(t, 30*time.Second, "the leader's gossip to see "+victim.ID()+" dead", func() bool {
		st, err := leader.Status(t.Context())
		if err != nil {
			return false
		}
		for _, m := range st.Nodes {
			if m.ID == victim.ID() {
				return m.Gossip == cluster.GossipDead
			}
		}
		return false
	})
	// A replacement with an empty data dir and the dead member's id.
	back := startNode(t, victim.ID(), t.TempDir(), false, []string{leader.HTTPAddr()}, nil)
	c.mu.Lock()
	c.nodes = append(c.nodes, back)
	c.mu.Unlock()
	wait.Until(t, 30*time.Second, "the leader to list "+victim.ID()+" at the replacement's addresses", func() bool {
		st, err := leader.Status(t.Context())
		if err != nil {
			return false
		}
		for _, m := range st.Nodes {
			if m.ID == back.ID() {
				return m.RaftAddr == back.RaftAddr() && m.HTTPAddr == back.HTTPAddr()
			}
		}
		return false
	})
	wait.Until(t, 30*time.Second, "the replacement to be ready", func() bool { return back.Ready(t.Context()) == nil })
	if err := back.Failure(); err != nil {
		t.Fatalf("the replacement of a dead member gave up: %v", err)
	}
}
