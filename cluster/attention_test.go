package cluster_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/carmyhq/carmy/cluster"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// TestListAttentionOfGoneNodes lists, through a runtime backed by a
// cluster, the executions that need a person: a running record of a node
// that is not a member of the cluster is one (its runner is gone, as
// Resolve judges it), a running record of a member is not, an interrupted
// record is.
func TestListAttentionOfGoneNodes(t *testing.T) {
	t.Parallel()
	// The ghost's running record must stay running: no stray sweep
	// (interruptStrays, after DeadGrace) while the test reads it.
	c := newCluster(t, 1, func(cfg *cluster.Config) { cfg.DeadGrace = time.Hour })
	st := c.nodes[0].Store()
	rt := engine.New(engine.WithNodeID("n1"), engine.WithLogger(slog.New(slog.DiscardHandler)))
	rt.IdempotencyStore(st)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})

	ghost := mustReserve(t, st, key("ghost"), exec("ghost"), store.Reserved)
	member := mustReserve(t, st, key("member"), exec("n1"), store.Reserved)
	lost := mustReserve(t, st, key("lost"), exec("old"), store.Reserved)
	if n, err := st.MarkInterrupted(t.Context(), "old"); err != nil || n != 1 {
		t.Fatalf("MarkInterrupted = %d, %v", n, err)
	}
	nodes, err := st.RunningNodes(t.Context())
	if err != nil || !slices.Equal(nodes, []string{"ghost", "n1"}) {
		t.Fatalf("RunningNodes = %v, %v; want [ghost n1]", nodes, err)
	}

	admin := engine.Caller{Principal: "admin", Admin: true}
	page, err := rt.List(t.Context(), admin, engine.ListRequest{AllSessions: true, Attention: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range page.Records {
		got = append(got, r.ExecutionID)
	}
	if want := []string{lost.ExecutionID, ghost.ExecutionID}; !slices.Equal(got, want) {
		t.Fatalf("attention = %v, want %v (not the member's %s)", got, want, member.ExecutionID)
	}
}
