package robustness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/carmyhq/carmy/api/wire"
	"github.com/carmyhq/carmy/tests/testutil"
)

// cutLinks makes each link from→to fail through the nodes' test fault
// layer: from stops reaching to (DropOut on from, DropIn on to) for Raft,
// gossip and node-to-node HTTP alike. The rules replace any earlier ones.
func (c *testCluster) cutLinks(links [][2]string) error {
	rules := map[string]*faultRules{}
	for _, name := range c.names {
		rules[name] = &faultRules{}
	}
	ips := map[string]string{}
	for _, name := range c.names {
		n := c.node(name)
		if n == nil {
			return fmt.Errorf("%s is not running", name)
		}
		if ips[name] = n.IP(); ips[name] == "" {
			return fmt.Errorf("%s has no address", name)
		}
	}
	for _, l := range links {
		from, to := l[0], l[1]
		rules[from].DropOut = appendNew(rules[from].DropOut, ips[to])
		rules[to].DropIn = appendNew(rules[to].DropIn, ips[from])
	}
	return each(c.names, func(name string) error {
		return c.nc.setFaults(context.Background(), c.node(name).URL(), *rules[name])
	})
}

// healLinks clears every node's fault-layer rules.
func (c *testCluster) healLinks() error {
	return each(c.names, func(name string) error {
		n := c.node(name)
		if n == nil {
			return nil
		}
		return c.nc.setFaults(context.Background(), n.URL(), faultRules{})
	})
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// removeMember removes voter target from the Raft configuration through
// another node's admin API (forwarded to the leader) and returns the
// member entry it had. With wipe, the node's container and volume are then
// destroyed; without, the node keeps running, out of the configuration.
func (c *testCluster) removeMember(target string, wipe bool) (testutil.ClusterMember, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var member testutil.ClusterMember
	// Repeat until the member is gone from the configuration.
	err := c.retry(ctx, target, func(url string) error {
		st, err := c.nc.status(ctx, url)
		if err != nil {
			return err
		}
		m, ok := st.Member(target)
		if !ok {
			return nil // removed
		}
		member = m
		if err := c.nc.removeNode(ctx, url, target); err != nil {
			return err
		}
		return errors.New("removal not yet visible")
	})
	if err != nil {
		return member, fmt.Errorf("removing %s: %w", target, err)
	}
	if wipe {
		return member, c.net.Remove(target)
	}
	return member, nil
}

// readd brings a removed member back: a wiped one as a new container
// with an empty data dir that joins the others by itself; a kept one is
// added back with its addresses through the admin API.
func (c *testCluster) readd(target string, member testutil.ClusterMember, wipe bool) error {
	if wipe {
		if _, err := c.net.Launch(target, c.launchArgs(target, false)...); err != nil {
			return fmt.Errorf("starting %s afresh: %w", target, err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec := wire.NodeSpec{ID: target, RaftAddr: member.RaftAddr, HTTPAddr: member.HTTPAddr}
	return c.retry(ctx, target, func(url string) error {
		return c.nc.addNode(ctx, url, spec)
	})
}

// retry calls fn with the URL of a reachable node other than skip, every
// 200 ms, until it returns nil or ctx ends.
func (c *testCluster) retry(ctx context.Context, skip string, fn func(url string) error) error {
	var last error
	for i := 0; ; i++ {
		var names []string
		for name := range c.urls() {
			if name != skip {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		if len(names) == 0 {
			last = errors.New("no node reachable")
		} else if last = fn(c.urls()[names[i%len(names)]]); last == nil {
			return nil
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		}
	}
}
