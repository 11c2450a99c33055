package robustness

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/robustness/ledgerapi"
	"github.com/carmyhq/carmy/tests/testutil"
)

// TestNodesSwapAddresses is the regression test of an anomaly the harness
// found: after a kill of every node, two containers came back on each
// other's former IP. Nodes advertised their Raft address as an IP, so the
// configuration then named n2 at n3's process and n3 at n2's; the
// rejoin-on-new-address logic evicted a live member for holding "its"
// address, and the cluster never became whole again (one node was left
// out, its log stale). Nodes now advertise the host name they were given,
// so the configuration survives any reshuffle of IPs.
func TestNodesSwapAddresses(t *testing.T) {
	testutil.LongTier(t, "containers of the fault-injection harness")
	requireDocker(t)
	c := startCluster(t, 3)
	n2, n3 := c.node("n2"), c.node("n3")
	ip2, ip3 := n2.IP(), n3.IP()
	if ip2 == "" || ip3 == "" {
		t.Fatalf("addresses: n2 %q n3 %q", ip2, ip3)
	}
	ctx := context.Background()
	first := c.nc.call(ctx, c.node("n1").URL(), "swap-1", ledgerapi.Args{Value: "a"})
	if first.kind != KindOK {
		t.Fatalf("call before the swap: %+v", first)
	}
	for _, n := range []interface{ Kill() error }{n2, n3} {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	if err := n2.SetIP(ip3); err != nil {
		t.Fatal(err)
	}
	if err := n3.SetIP(ip2); err != nil {
		t.Fatal(err)
	}
	for _, n := range []interface{ Start() error }{n3, n2} {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if got2, got3 := n2.IP(), n3.IP(); got2 != ip3 || got3 != ip2 {
		t.Fatalf("after the swap n2 is at %s (want %s), n3 at %s (want %s)", got2, ip3, got3, ip2)
	}
	if _, err := c.waitHealthy(ctx, recoverTimeout); err != nil {
		t.Fatalf("the cluster is not whole after the swap: %v\n%s", err, c.describe())
	}
	// Every node replays the call made before, and takes a new one.
	for _, name := range c.names {
		o := c.nc.call(ctx, c.node(name).URL(), "swap-1", ledgerapi.Args{Value: "a"})
		if o.kind != KindOK || o.executionID != first.executionID || !o.replayed {
			t.Fatalf("%s: replay after the swap: %+v, want execution %s replayed", name, o, first.executionID)
		}
		n := c.nc.call(ctx, c.node(name).URL(), fmt.Sprint("swap-new-", name), ledgerapi.Args{Value: "b"})
		if n.kind != KindOK || n.replayed {
			t.Fatalf("%s: new call after the swap: %+v", name, n)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := c.converge(cctx); err != nil {
		t.Fatalf("%v\n%s", err, c.describe())
	}
}
