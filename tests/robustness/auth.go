package robustness

import (
	"context"
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// The harness's principals (deploy/docker/test/carmy.yaml): the workload
// calls as "agent", the approver decides the gated calls as "approver",
// and the harness administers the cluster as the admin.

// Variables the test image's config reads the tokens from.
const (
	envAgentToken    = "CARMY_ROBUST_AGENT_TOKEN"
	envApproverToken = "CARMY_ROBUST_APPROVER_TOKEN"
	envAdminToken    = "CARMY_ROBUST_ADMIN_TOKEN"
)

// runTokens are one run's bearer tokens, made afresh for it.
type runTokens struct {
	Agent, Approver, Admin string
}

// newRunTokens makes a run's tokens: 32 random bytes each, in base64.
func newRunTokens(t testing.TB) runTokens {
	t.Helper()
	return runTokens{Agent: gossipKey(t), Approver: gossipKey(t), Admin: gossipKey(t)}
}

// env is what the nodes' containers get: the variables the config names.
func (tk runTokens) env() []string {
	return []string{envAgentToken + "=" + tk.Agent, envApproverToken + "=" + tk.Approver, envAdminToken + "=" + tk.Admin}
}

// status reads the node's GET /v1/cluster, which needs the admin token.
func (c *nodeClient) status(ctx context.Context, baseURL string) (testutil.ClusterStatus, error) {
	return testutil.FetchClusterStatusAs(ctx, baseURL, c.tokens.Admin)
}
