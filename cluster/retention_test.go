package cluster_test

import (
	"errors"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/tests/testutil"
)

func TestRetentionRemovesOnlyFinishedRecords(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, func(cfg *cluster.Config) { cfg.Retention = 500 * time.Millisecond })
	s := c.followers()[0].Store()
	done := exec("n9")
	mustReserve(t, s, key("old"), done, store.Reserved)
	res := completed(done.ID)
	res.FinishedAt = time.Now().UTC()
	if _, err := s.Complete(t.Context(), key("old"), "fp", res); err != nil {
		t.Fatal(err)
	}
	running := exec("n9")
	mustReserve(t, s, key("running"), running, store.Reserved)
	interrupted := exec("n8")
	mustReserve(t, s, key("interrupted"), interrupted, store.Reserved)
	if _, err := s.MarkInterrupted(t.Context(), "n8"); err != nil {
		t.Fatal(err)
	}
	// The leader's expire command removes the finished record on every
	// replica alike.
	testutil.WaitUntil(t, 30*time.Second, "the finished record to expire everywhere", func() bool {
		for _, n := range c.nodes {
			if _, err := n.FSM().Get(done.ID); !errors.Is(err, store.ErrNotFound) {
				return false
			}
		}
		return true
	})
	for _, n := range c.nodes {
		for _, id := range []string{running.ID, interrupted.ID} {
			if _, err := n.FSM().Get(id); err != nil {
				t.Fatalf("%s: retention removed an open record %s: %v", n.ID(), id, err)
			}
		}
	}
	// The identity is vacant again.
	mustReserve(t, s, key("old"), exec("n9"), store.Reserved)
}
