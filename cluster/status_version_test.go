package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/carmyhq/carmy/internal/buildinfo"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// TestStatusShowsEachNodesVersion: every node's view of the cluster names
// the version each member runs, the others' learned from their gossip
// metadata.
func TestStatusShowsEachNodesVersion(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, nil)
	want := buildinfo.Version()
	for _, n := range c.nodes {
		wait.For(t, 10*time.Second, n.ID()+"'s view of every member's version", func() error {
			st, err := n.Status(t.Context())
			if err != nil {
				return err
			}
			if len(st.Nodes) != 2 {
				return fmt.Errorf("%d members", len(st.Nodes))
			}
			for _, m := range st.Nodes {
				if m.Version != want {
					return fmt.Errorf("%s has version %q, want %q", m.ID, m.Version, want)
				}
			}
			return nil
		})
	}
}
