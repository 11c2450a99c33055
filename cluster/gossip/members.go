package gossip

import (
	"encoding/json"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/carmyhq/carmy/fsm"
)

// Meta is what a node says of itself in its gossip metadata (JSON): its
// addresses, and the version of Carmy it runs (omitted by builds before
// it, and ignored by them: they decode the addresses alone).
type Meta struct {
	fsm.NodeInfo
	Version string `json:"version,omitempty"`
}

// Members tracks what gossip says of each node: the memberlist event
// delegate, plus when each member was last seen to die.
type Members struct {
	mu        sync.Mutex
	meta      map[string]Meta // from gossip metadata
	deadSince map[string]time.Time
	self      string
}

// NewMembers returns the tracker of the node named self.
func NewMembers(self string) *Members {
	return &Members{meta: make(map[string]Meta), deadSince: make(map[string]time.Time), self: self}
}

// NotifyJoin implements memberlist.EventDelegate.
func (m *Members) NotifyJoin(node *memberlist.Node) { m.alive(node) }

// NotifyUpdate implements memberlist.EventDelegate.
func (m *Members) NotifyUpdate(node *memberlist.Node) { m.alive(node) }

// NotifyLeave implements memberlist.EventDelegate.
func (m *Members) NotifyLeave(node *memberlist.Node) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dead := m.deadSince[node.Name]; !dead {
		m.deadSince[node.Name] = time.Now()
	}
}

func (m *Members) alive(node *memberlist.Node) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.deadSince, node.Name)
	var meta Meta
	if json.Unmarshal(node.Meta, &meta) == nil && meta.ID == node.Name {
		meta.GossipAddr = net.JoinHostPort(node.Addr.String(), strconv.Itoa(int(node.Port)))
		m.meta[node.Name] = meta
	}
}

// DeadFor returns how long gossip has seen id dead, and whether it has.
func (m *Members) DeadFor(id string) (time.Duration, bool) {
	since, dead := m.DiedAt(id)
	if !dead {
		return 0, false
	}
	return time.Since(since), true
}

// DiedAt returns when gossip last saw id die (reset when it comes back),
// and whether it is dead now.
func (m *Members) DiedAt(id string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	since, dead := m.deadSince[id]
	return since, dead
}

// Info returns the addresses a member advertised in gossip.
func (m *Members) Info(id string) (fsm.NodeInfo, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	meta, ok := m.meta[id]
	return meta.NodeInfo, ok
}

// Version returns the version of Carmy a member said in gossip it runs;
// "" when it said none or gossip has not heard from it.
func (m *Members) Version(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.meta[id].Version
}

// Delegate serves meta, this node's metadata (its Meta, JSON), to
// memberlist.
func Delegate(meta []byte) memberlist.Delegate { return &delegate{meta: meta} }

// delegate is Delegate's.
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
