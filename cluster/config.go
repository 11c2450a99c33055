package cluster

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/cluster/raftlog"
)

// Config configures a Node.
type Config struct {
	// NodeID is the node's unique, stable name (Raft server id, gossip
	// name).
	NodeID string
	// DataDir holds raft-log/ (the Raft log's WAL), raft.db (Raft's term
	// and vote; the log too with RaftLog bolt) and snapshots/.
	DataDir string
	// RaftAddr is the Raft transport's host:port (port 0 picks one).
	RaftAddr string
	// GossipAddr is memberlist's host:port, TCP and UDP (port 0 picks one).
	GossipAddr string
	// HTTPAddr is where this node's API (and its peer endpoints, package
	// peer) is reached by the others.
	HTTPAddr string
	// Bootstrap starts a new cluster with this node as its only voter when
	// the data dir holds no state.
	Bootstrap bool
	// Join lists HTTP addresses of existing members; a node with no state
	// asks them to add it.
	Join []string
	// BootstrapUnlessCluster, on a node with no state, founds a cluster
	// only once every other Join address answers that it holds no cluster
	// state either; as soon as one holds some, the node joins through
	// Join instead. It lets one command line serve every node of a set
	// (one node is named to found the cluster) without a node that lost
	// its data founding a second cluster. While some address does not
	// answer, the node waits. Exclusive with Bootstrap.
	BootstrapUnlessCluster bool
	// ClusterKey is the secret shared by the nodes of a cluster, at least
	// MinClusterKeyBytes long. Every node-to-node HTTP call carries it
	// (compared in constant time), and without TLS every Raft connection
	// proves it holds it (a challenge-response handshake) before a Raft
	// byte is read. Node-to-node calls are never trusted for their source
	// address: a node needs a ClusterKey, or TLS, or both (then both are
	// checked).
	ClusterKey string
	// GossipKeys, when set, encrypt and authenticate gossip (memberlist's
	// AES-GCM keyring): the first key encrypts, any of them decrypts (so a
	// key can be rotated by rolling restarts), and a packet under no key is
	// dropped. Each key is 16, 24 or 32 bytes. Empty with a ClusterKey: one
	// 32-byte key derived from the cluster key (HKDF-SHA256, info
	// "carmy gossip key v1"), so gossip is encrypted by default. Empty
	// without one: gossip in the clear.
	GossipKeys [][]byte
	// TLS, when set, runs every Raft connection and every node-to-node
	// HTTP call over mutual TLS against the cluster's CA (NodeTLS). The
	// node's HTTP listener must then serve ServerTLSConfig for connections
	// naming tlsmux.NodeServerName (carmy.Runtime.Serve does, given it as
	// api.Config.NodeTLS).
	TLS *NodeTLS
	// MaxEntries is the cluster-wide bound on records (the leader's value
	// applies).
	MaxEntries int
	// MaxBytes is the cluster-wide bound on bytes (store.RecordSize summed
	// over every record; the leader's value applies); 0: none.
	MaxBytes int64
	// Retention is the age after which finished records are removed; 0
	// keeps them.
	Retention time.Duration
	// AuditRetention is the age after which the audit ledger's entries
	// are pruned (a checkpoint of the last one pruned stays); 0 keeps
	// every entry.
	AuditRetention time.Duration
	// AuditSigningKey, when set, is the Ed25519 key the leader signs the
	// audit ledger's head with, every AuditCheckpointEvery while the head
	// moved, appending a checkpoint entry (docs/audit.md).
	AuditSigningKey ed25519.PrivateKey
	// AuditCheckpointEvery is how often the leader signs a checkpoint; 0
	// is DefaultAuditCheckpointEvery.
	AuditCheckpointEvery time.Duration
	// LeaderWait bounds how long a write waits for a leader.
	LeaderWait time.Duration
	// DeadGrace is how long gossip must see a member dead before the
	// leader marks its running executions interrupted.
	DeadGrace time.Duration
	// RaftLog is the Raft log's store: raftlog.LogWAL (the default, "")
	// or raftlog.LogBolt (raft.db, beside Raft's term and vote). See
	// docs/operations.md for the data dir's layout and the migration.
	RaftLog string
	// SnapshotThreshold and SnapshotInterval tune Raft's snapshots.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// Fast shortens Raft's and memberlist's timers for tests on loopback.
	Fast   bool
	Logger *slog.Logger
	// Metrics, when set, receives the node's Prometheus metrics and the
	// Raft, memberlist and BoltDB metrics routed from go-metrics.
	Metrics prometheus.Registerer
	// Hooks wrap the node's network connections, for tests that inject
	// faults. Production leaves them unset.
	Hooks Hooks
	// ShutdownTimeout bounds Close (default DefaultShutdownTimeout): when
	// the node's parts (Raft, its transport) have not stopped by then,
	// Close returns an error matching ErrShutdownTimeout and leaves them
	// to finish in the background.
	ShutdownTimeout time.Duration
}

// NodeTLS names the files of mutual TLS between nodes (nodeauth.Files):
// the cluster's CA and this node's certificate and key (PEM).
type NodeTLS = nodeauth.Files

// MinClusterKeyBytes is the shortest cluster key a node accepts.
const MinClusterKeyBytes = 16

// DialFunc dials like net.Dialer.DialContext.
type DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// Hooks let test code wrap the node's network (a fault-injection layer
// that cuts this node off from chosen peers, say): each hook receives what
// the node would use and returns what it uses instead. A nil hook wraps
// nothing, and with none set the node behaves exactly as without them.
type Hooks struct {
	// Dial wraps the dialer of node-to-node HTTP calls (forwarding, read
	// barriers, joins). Node TLS, when on, runs over what it returns.
	Dial func(next DialFunc) DialFunc
	// RaftStream wraps the plain TCP stream layer of the Raft transport
	// (its listener and its dials); node TLS, when on, and the connection
	// preamble run over what it returns.
	RaftStream func(raft.StreamLayer) raft.StreamLayer
	// Gossip wraps memberlist's transport. With it set, the node makes
	// memberlist's NetTransport itself, bound as memberlist would bind it.
	Gossip func(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport
	// LogStore wraps the durable Raft log store (BoltDB), beneath the
	// leader's write queue, so a test can hold or fail its writes.
	LogStore func(raft.LogStore) raft.LogStore
}

// Defaults of Config.
const (
	DefaultLeaderWait        = 5 * time.Second
	DefaultDeadGrace         = 10 * time.Second
	DefaultSnapshotThreshold = 8192
	DefaultSnapshotInterval  = 2 * time.Minute
	DefaultShutdownTimeout   = 10 * time.Second
)

func (c *Config) setDefaults() {
	if c.LeaderWait <= 0 {
		c.LeaderWait = DefaultLeaderWait
	}
	if c.DeadGrace <= 0 {
		c.DeadGrace = DefaultDeadGrace
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = DefaultSnapshotThreshold
	}
	if c.SnapshotInterval <= 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	switch {
	case c.NodeID == "":
		return errors.New("cluster: empty node id")
	case c.DataDir == "":
		return errors.New("cluster: empty data dir")
	case c.MaxEntries < 0:
		return errors.New("cluster: negative max entries")
	case c.MaxBytes < 0:
		return errors.New("cluster: negative max bytes")
	case c.AuditSigningKey != nil && len(c.AuditSigningKey) != ed25519.PrivateKeySize:
		return errors.New("cluster: AuditSigningKey is not an Ed25519 private key")
	case c.AuditCheckpointEvery < 0:
		return errors.New("cluster: negative AuditCheckpointEvery")
	case c.AuditRetention < 0:
		return errors.New("cluster: negative audit retention")
	case c.Retention < 0:
		return errors.New("cluster: negative retention")
	case c.BootstrapUnlessCluster && c.Bootstrap:
		return errors.New("cluster: Bootstrap and BootstrapUnlessCluster exclude each other")
	case c.RaftLog != "" && c.RaftLog != raftlog.LogWAL && c.RaftLog != raftlog.LogBolt:
		return fmt.Errorf("cluster: raft log store %q: want %q or %q", c.RaftLog, raftlog.LogWAL, raftlog.LogBolt)
	}
	for i, k := range c.GossipKeys {
		if l := len(k); l != 16 && l != 24 && l != 32 {
			return fmt.Errorf("cluster: gossip key %d is %d bytes: want 16, 24 or 32", i+1, l)
		}
	}
	for name, addr := range map[string]string{"raft": c.RaftAddr, "gossip": c.GossipAddr, "http": c.HTTPAddr} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("cluster: %s address %q: %w", name, addr, err)
		}
	}
	switch {
	case c.ClusterKey == "" && c.TLS == nil:
		// Not even on loopback: any local process could otherwise post
		// commands to the log, or speak Raft to it.
		return errors.New("cluster: a cluster key or node TLS is required: node-to-node calls are never trusted for their address " +
			"(set Config.ClusterKey, at least 16 bytes shared by every node, or Config.TLS; carmy serve generates a key in the data dir)")
	case c.ClusterKey != "" && len(c.ClusterKey) < MinClusterKeyBytes:
		return fmt.Errorf("cluster: the cluster key is %d bytes: want at least %d (carmy keygen makes one)", len(c.ClusterKey), MinClusterKeyBytes)
	}
	return nil
}
