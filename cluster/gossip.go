package cluster

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/internal/netaddr"
)

// Gossip states of a member, as GET /v1/cluster shows them.
const (
	GossipAlive   = "alive"
	GossipSuspect = "suspect"
	GossipDead    = "dead"
	GossipUnknown = "unknown"
)

// members tracks what gossip says of each node: the memberlist event
// delegate, plus when each member was last seen to die.
type members struct {
	mu        sync.Mutex
	meta      map[string]fsm.NodeInfo // from gossip metadata
	deadSince map[string]time.Time
	self      string
}

func newMembers(self string) *members {
	return &members{meta: make(map[string]fsm.NodeInfo), deadSince: make(map[string]time.Time), self: self}
}

func (m *members) NotifyJoin(node *memberlist.Node)   { m.alive(node) }
func (m *members) NotifyUpdate(node *memberlist.Node) { m.alive(node) }

func (m *members) NotifyLeave(node *memberlist.Node) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dead := m.deadSince[node.Name]; !dead {
		m.deadSince[node.Name] = time.Now()
	}
}

func (m *members) alive(node *memberlist.Node) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.deadSince, node.Name)
	var info fsm.NodeInfo
	if json.Unmarshal(node.Meta, &info) == nil && info.ID == node.Name {
		info.GossipAddr = net.JoinHostPort(node.Addr.String(), strconv.Itoa(int(node.Port)))
		m.meta[node.Name] = info
	}
}

// deadFor returns how long gossip has seen id dead, and whether it has.
func (m *members) deadFor(id string) (time.Duration, bool) {
	since, dead := m.diedAt(id)
	if !dead {
		return 0, false
	}
	return time.Since(since), true
}

// diedAt returns when gossip last saw id die (reset when it comes back),
// and whether it is dead now.
func (m *members) diedAt(id string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	since, dead := m.deadSince[id]
	return since, dead
}

// info returns the addresses a member advertised in gossip.
func (m *members) info(id string) (fsm.NodeInfo, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	info, ok := m.meta[id]
	return info, ok
}

// delegate serves this node's metadata to memberlist.
type delegate struct{ meta []byte }

func (d *delegate) NodeMeta(limit int) []byte {
	if len(d.meta) > limit {
		return nil
	}
	return d.meta
}
func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

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
	meta, err := json.Marshal(fsm.NodeInfo{ID: n.cfg.NodeID, RaftAddr: n.RaftAddr(), HTTPAddr: n.cfg.HTTPAddr})
	if err != nil {
		return err
	}
	keys, err := gossipKeys(n.cfg)
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
	mc.Delegate = &delegate{meta: meta}
	n.members = newMembers(n.cfg.NodeID)
	mc.Events = n.members
	mc.Logger = memberlistLogger(n.cfg.Logger)
	if n.cfg.Hooks.Gossip != nil {
		if mc.Transport, err = hookedGossipTransport(n.cfg, mc); err != nil {
			return err
		}
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		if mc.Transport != nil {
			// memberlist does not always shut a given transport down.
			_ = mc.Transport.Shutdown()
		}
		return fmt.Errorf("cluster: gossip on %s: %w", n.cfg.GossipAddr, err)
	}
	n.gossip = ml
	return nil
}

// hookedGossipTransport makes the transport memberlist would make for mc,
// wrapped by cfg.Hooks.Gossip. Like memberlist, it retries a bind to port
// 0 and then sets mc's ports to the one bound.
func hookedGossipTransport(cfg Config, mc *memberlist.Config) (memberlist.NodeAwareTransport, error) {
	nc := &memberlist.NetTransportConfig{
		BindAddrs: []string{mc.BindAddr}, BindPort: mc.BindPort, Logger: mc.Logger, MetricLabels: mc.MetricLabels,
	}
	tries := 1
	if mc.BindPort == 0 {
		tries = 10 // another socket may take the TCP port's number on UDP
	}
	var nt *memberlist.NetTransport
	var err error
	for range tries {
		if nt, err = memberlist.NewNetTransport(nc); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: gossip transport on %s: %w", cfg.GossipAddr, err)
	}
	if mc.BindPort == 0 {
		mc.BindPort = nt.GetAutoBindPort()
		mc.AdvertisePort = mc.BindPort
	}
	return cfg.Hooks.Gossip(nt), nil
}

// gossipKeyInfo is the HKDF info of the gossip key derived from the
// cluster key: a key of its own for each use, and a version should the
// derivation ever change.
const gossipKeyInfo = "carmy gossip key v1"

// gossipKeys returns the keys gossip runs under: cfg.GossipKeys when given;
// else, with a cluster key, one 32-byte key derived from it
// (HKDF-SHA256, no salt, info gossipKeyInfo), so that nodes sharing a
// cluster key gossip encrypted and authenticated with no more setup, and
// nodes of another cluster cannot join; else none.
func gossipKeys(cfg Config) ([][]byte, error) {
	if len(cfg.GossipKeys) > 0 || cfg.ClusterKey == "" {
		return cfg.GossipKeys, nil
	}
	k, err := hkdf.Key(sha256.New, []byte(cfg.ClusterKey), nil, gossipKeyInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("cluster: deriving the gossip key: %w", err)
	}
	return [][]byte{k}, nil
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
	if _, dead := n.members.deadFor(id); dead {
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
	if _, dead := n.members.deadFor(runnerID); dead && n.gossipState(runnerID) == GossipDead {
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
