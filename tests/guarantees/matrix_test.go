package guarantees_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// routes are the matrix's columns: every way a call reaches a node.
var routes = []route{
	{name: "http", kind: httpTool, open: openHTTP},
	{name: "mcp-gosdk-2025-06-18", kind: httpTool, open: openSDK("2025-06-18"), abortCancels: true},
	{name: "mcp-gosdk-2025-11-25", kind: httpTool, open: openSDK("2025-11-25"), abortCancels: true},
	{name: "mcp-gosdk-2026-07-28", kind: httpTool, open: openSDK("2026-07-28"), abortCancels: true},
	{name: "mcp-mcpgo-2025-06-18", kind: httpTool, open: openM3("2025-06-18")},
	{name: "mcp-mcpgo-2025-11-25", kind: httpTool, open: openM3("2025-11-25")},
	{name: "mcp-mcpgo-2026-07-28", kind: httpTool, open: openM3("2026-07-28"), abortCancels: true},
	{name: "tasks-2025-11-25", kind: httpTool, open: openTasks(v20251125), sameTask: true},
	{name: "tasks-2026-07-28", kind: httpTool, open: openTasks(v20260728)},
	{name: "gateway-http", kind: gatewayHTTP, open: openHTTP},
	{name: "gateway-stdio", kind: gatewayStdio, open: openHTTP},
}

// notApplicable lists the cells that cannot apply, each with its reason;
// docs/testing.md repeats the table (TestNotApplicableDocumented). A key
// is "route/scenario", "*" matching any.
var notApplicable = map[string]string{
	"tasks-2025-11-25/client-aborts": "a task call is answered as soon as its tool's request has left the node: there is no call in flight to abort, and a poll given up changes nothing",
	"tasks-2026-07-28/client-aborts": "a task call is answered as soon as its tool's request has left the node: there is no call in flight to abort, and a poll given up changes nothing",
}

func notApplicableTo(r, s string) (string, bool) {
	for _, key := range []string{r + "/" + s, "*/" + s, r + "/*"} {
		if why, ok := notApplicable[key]; ok {
			return why, true
		}
	}
	return "", false
}

// shortRoutes are the routes of each back end in the short matrix (CI's):
// every route on one node, and on the others the HTTP API, one client of
// each SDK, tasks and both gateways.
var shortRoutes = map[string][]string{
	"one":   nil, // all
	"three": {"http", "mcp-gosdk-2026-07-28", "mcp-mcpgo-2025-06-18", "tasks-2025-11-25", "gateway-http", "gateway-stdio"},
	"fleet": {"http", "mcp-gosdk-2025-11-25", "tasks-2026-07-28", "gateway-stdio"},
}

// shortScenarioRoutes narrows a scenario to some routes of a back end in
// the short matrix. On three nodes runner-killed takes the back end alone
// for about 25 s (the gossip's dead-node bound, then the node's restart);
// what it checks happens after the call arrived, on the nodes that
// survive, so two routes stand for the rest there (the full matrix runs
// every one).
var shortScenarioRoutes = map[string]map[string][]string{
	"three": {"runner-killed": {"http", "mcp-gosdk-2026-07-28"}},
}

// inShort reports whether the short matrix runs the cell.
func inShort(b, r, s string) bool {
	if shortRoutes[b] != nil && !slices.Contains(shortRoutes[b], r) {
		return false
	}
	if only, ok := shortScenarioRoutes[b][s]; ok && !slices.Contains(only, r) {
		return false
	}
	return true
}

// full reports whether the whole matrix runs (CARMY_GUARANTEES=full).
func full() bool { return os.Getenv("CARMY_GUARANTEES") == "full" }

// TestGuarantees runs the matrix: back end × route × scenario, each cell a
// subtest named backend/route/scenario. The short matrix is the default,
// its back ends of several nodes in the long tier (CARMY_TEST_LONG=1, as
// CI runs it); CARMY_GUARANTEES=full runs every route on every back end.
// CARMY_GUARANTEES_BACKENDS (comma-separated) picks back ends.
func TestGuarantees(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs carmy processes, upstreams and PostgreSQL")
	}
	bin := testutil.BuildCarmy(t)
	pick := os.Getenv("CARMY_GUARANTEES_BACKENDS")
	for _, b := range backends {
		if pick != "" && !slices.Contains(strings.Split(pick, ","), b.name) {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			if b.name != "one" && !full() {
				// Every route on one node stays in the README's test
				// command; the back ends of several nodes, minutes more,
				// are the long tier's (CI runs them).
				testutil.LongTier(t, "the guarantee matrix on "+b.name+" nodes")
			}
			fix := newFixtures(t)
			e := &env{fix: fix, callers: map[string]caller{}}
			e.d = b.start(t, bin, fix.config(t))
			t.Cleanup(e.forget)
			for _, r := range routes {
				if !full() && !inShort(b.name, r.name, "") {
					continue
				}
				t.Run(r.name, func(t *testing.T) {
					t.Parallel()
					for _, s := range scenarios {
						t.Run(s.name, func(t *testing.T) {
							if why, ok := notApplicableTo(r.name, s.name); ok {
								t.Skip("not applicable: " + why)
							}
							if !full() && !inShort(b.name, r.name, s.name) {
								t.Skip("the short matrix runs this scenario on " + strings.Join(shortScenarioRoutes[b.name][s.name], " and ") + " here; CARMY_GUARANTEES=full runs it")
							}
							e.world.RLock()
							defer e.world.RUnlock()
							ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
							defer cancel()
							s.run(&cell{T: t, e: e, r: r, ctx: ctx, id: b.name + "/" + r.name + "/" + s.name})
						})
					}
				})
			}
		})
	}
}
