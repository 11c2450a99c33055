package cluster_test

import (
	"context"
	"errors"
	"testing"

	"github.com/carmyhq/carmy/store"
)

// TestQuotaRefusalFromEveryNode checks that a reservation refused at a
// principal's quota comes back as a *store.QuotaError naming it whichever
// node proposed it (the leader applying it, or a follower forwarding it),
// and that the bound is the proposer's: it travels in the command.
func TestQuotaRefusalFromEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	t.Parallel()
	c := newCluster(t, 3, nil)
	leader := c.leader()
	withQuota := func(node string, n int) store.Execution {
		ex := exec(node)
		ex.Quota = n
		return ex
	}
	mustReserve(t, leader.Store(), key("q1"), withQuota(leader.ID(), 2), store.Reserved)
	mustReserve(t, leader.Store(), key("q2"), withQuota(leader.ID(), 2), store.Reserved)

	nodes := append([]*testNode{leader}, c.followers()...)
	for _, n := range nodes {
		_, err := n.Store().Reserve(context.Background(), key("q3"), "fp", withQuota(n.ID(), 2))
		var qe *store.QuotaError
		if !errors.As(err, &qe) || qe.Principal != "p" || qe.Quota != 2 || !errors.Is(err, store.ErrCapacity) {
			t.Fatalf("reserve at the quota proposed by %s: err = %v, want a *store.QuotaError of p at 2", n.ID(), err)
		}
		// The held identities are answered from every node.
		mustReserve(t, n.Store(), key("q1"), withQuota(n.ID(), 2), store.Uncertain)
	}
	// A follower proposing a higher bound gets its reservation: the bound
	// is the command's, not the applying node's.
	f := c.followers()[0]
	mustReserve(t, f.Store(), key("q3"), withQuota(f.ID(), 3), store.Reserved)
	if _, err := leader.Store().Reserve(context.Background(), key("q4"), "fp", withQuota(leader.ID(), 3)); !errors.Is(err, store.ErrCapacity) {
		t.Fatalf("reserve at the raised quota: err = %v, want capacity", err)
	}
}
