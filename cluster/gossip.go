package cluster

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/carmyhq/carmy/cluster/gossip"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/internal/buildinfo"
	"github.com/carmyhq/carmy/internal/netaddr"
)

// Gossip states of a member, as GET /v1/cluster shows them.
const (
	GossipAlive   = "alive"
	GossipSuspect = "suspect"
	GossipDead    = "dead"
	GossipUnknown = "unknown"
)

// startGossip creates this node's memberlist member.
func (n *Node) startGossip() error {
	host, portStr, err := net.SplitHostPort(n.cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("cluster: gossip address: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("cluster: gossip port: %w", err)
	}
	var mc *memberlist.Config
	if netaddr.IsLoopback(n.cfg.GossipAddr) {
		mc = memberlist.DefaultLocalConfig()
	} else {
		mc = memberlist.DefaultLANConfig()
	}
	if n.cfg.Fast {
		mc.ProbeInterval = 200 * time.Millisecond
		mc.ProbeTimeout = 100 * time.Millisecond
		mc.SuspicionMult = 2
		mc.GossipInterval = 50 * time.Millisecond
	}
	if host != "" && net.ParseIP(host) == nil {
		// memberlist binds and advertises IPs: resolve a host name.
		ips, err := net.LookupIP(host)
		if err != nil || len(ips) == 0 {
			return fmt.Errorf("cluster: gossip host %q: %w", host, err)
		}
		host = ips[0].String()
	}
	// A member that comes back on another address (a container with a
	// new IP) may take its name back once it has been dead this long,
	// rather than be refused as a conflict.
	mc.DeadNodeReclaimTime = 5 * time.Second
	mc.Name = n.cfg.NodeID
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertisePort = port
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
		mc.AdvertiseAddr = host
	}
	meta, err := json.Marshal(gossip.Meta{
		NodeInfo: fsm.NodeInfo{ID: n.cfg.NodeID, RaftAddr: n.RaftAddr(), HTTPAddr: n.cfg.HTTPAddr},
		Version:  buildinfo.Version(),
	})
	if err != nil {
		return err
	}
	keys, err := gossip.Keys(n.cfg.GossipKeys, n.cfg.ClusterKey)
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		kr, err := memberlist.NewKeyring(keys[1:], keys[0])
		if err != nil {
			return fmt.Errorf("cluster: gossip keys: %w", err)
		}
		mc.Keyring = kr
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	mc.Delegate = gossip.Delegate(meta)
	n.members = gossip.NewMembers(n.cfg.NodeID)
	mc.Events = n.members
	mc.Logger = memberlistLogger(n.cfg.Logger)
	if n.cfg.Hooks.Gossip != nil {
		if mc.Transport, err = gossip.HookedTransport(mc, n.cfg.GossipAddr, n.cfg.Hooks.Gossip); err != nil {
			return err
		}
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		if mc.Transport != nil {
			// memberlist does not always shut a given transport down.
			_ = mc.Transport.Shutdown()
		}
		return &ListenError{Listener: ListenerGossip, Addr: n.cfg.GossipAddr, Err: err}
	}
	n.gossip = ml
	return nil
}

// GossipAddr returns the address memberlist advertises.
func (n *Node) GossipAddr() string {
	if n.gossip == nil {
		return n.cfg.GossipAddr
	}
	self := n.gossip.LocalNode()
	return net.JoinHostPort(self.Addr.String(), strconv.Itoa(int(self.Port)))
}

// gossipState returns what gossip says of a member.
func (n *Node) gossipState(id string) string {
	if id == n.cfg.NodeID {
		return GossipAlive
	}
	for _, m := range n.gossip.Members() {
		if m.Name == id {
			if m.State == memberlist.StateSuspect {
				return GossipSuspect
			}
			return GossipAlive
		}
	}
	if _, dead := n.members.DeadFor(id); dead {
		return GossipDead
	}
	return GossipUnknown
}

// JoinGossip joins the gossip pool through the given gossip addresses.
func (n *Node) JoinGossip(addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	_, err := n.gossip.Join(addrs)
	return err
}

// gossipRejoin keeps this node in the gossip pool: while a member known to
// the replicated node table is missing from gossip, it joins through the
// table's gossip addresses. This is how a restarted node finds the pool
// from its data dir alone, and how a healed partition merges back.
func (n *Node) gossipRejoin() {
	for n.sleep(time.Second) {
		var addrs []string
		for _, info := range n.knownMembers() {
			if info.ID == n.cfg.NodeID || info.GossipAddr == "" {
				continue
			}
			if n.gossipState(info.ID) != GossipAlive {
				addrs = append(addrs, info.GossipAddr)
			}
		}
		if len(addrs) > 0 {
			if _, err := n.gossip.Join(addrs); err != nil {
				n.log.Debug("gossip join", slog.Any("err", err))
			}
		}
	}
}

// RunnerGone reports whether the node runnerID is known to be gone:
// gossip declared it dead, or it is no longer in the Raft configuration.
// It implements carmy.Liveness.
func (n *Node) RunnerGone(runnerID string) bool {
	if runnerID == n.cfg.NodeID {
		return false
	}
	if _, dead := n.members.DeadFor(runnerID); dead && n.gossipState(runnerID) == GossipDead {
		return true
	}
	cfg := n.raft.GetConfiguration()
	if cfg.Error() != nil {
		return false
	}
	for _, s := range cfg.Configuration().Servers {
		if string(s.ID) == runnerID {
			return false
		}
	}
	return true
}

// GossipMembers returns the names of the members this node's gossip pool
// holds as alive or suspect, itself included, sorted.
func (n *Node) GossipMembers() []string {
	if n.gossip == nil {
		return nil
	}
	var out []string
	for _, m := range n.gossip.Members() {
		if m.State == memberlist.StateAlive || m.State == memberlist.StateSuspect {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// knownMembers returns the member table, or the cached one while the
// table is still empty (just after a restart).
func (n *Node) knownMembers() []fsm.NodeInfo {
	if m := n.fsm.Nodes(); len(m) > 0 {
		return m
	}
	return n.cache.Get()
}
