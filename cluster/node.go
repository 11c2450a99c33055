package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/carmyhq/carmy/cluster/forward"
	"github.com/carmyhq/carmy/cluster/gossip"
	"github.com/carmyhq/carmy/cluster/nodeauth"
	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/cluster/raftlog"
	"github.com/carmyhq/carmy/fsm"
	"github.com/carmyhq/carmy/store/audit"
)

// Node is one member of a Carmy cluster. Open starts it; Close stops it.
// All methods are safe for concurrent use.
type Node struct {
	cfg Config
	log *slog.Logger
	fsm *fsm.FSM
	// ledger is the audit ledger (audit.db in the data dir), which the
	// FSM writes as it applies.
	ledger *fsm.Ledger
	raft   *raft.Raft

	bolt      *raftboltdb.BoltStore // Raft's stable store (and log store with --raft-log bolt)
	walLog    *raftlog.WAL          // the Raft log's WAL; nil with --raft-log bolt
	logs      *raftlog.QueuedLog    // the Raft log store over the WAL (or bolt)
	reserve   *raftlog.Reserve
	transport *raft.NetworkTransport
	gossip    *memberlist.Memberlist
	members   *gossip.Members
	cache     *gossip.Cache
	fwd       *forward.Forwarder
	client    *peer.Client
	tls       *nodeauth.TLS // nil without node TLS
	refusals  *nodeauth.Refusals
	metrics   *nodeMetrics
	proposer  *proposer
	streams   connSet    // the forward streams this node serves
	reloadMu  sync.Mutex // serializes raft.ReloadConfig (checkSilence)

	// leaderReady is the term in which this node, as leader, has applied
	// everything committed before it (its barrier returned); 0 otherwise.
	leaderReady atomic.Uint64

	onCancelMu sync.RWMutex
	onCancel   func(executionID string)

	stop     chan struct{}
	stopOnce sync.Once
	// failed is closed when the node gives up (giveUp), with why in
	// failErr.
	failed   chan struct{}
	failOnce sync.Once
	failErr  error
	wg       sync.WaitGroup
	// closeOnce starts the one shutdown; closed is closed when it is
	// over, with its error in closeErr.
	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
	// bgCtx bounds the background work's calls; Close cancels it so that
	// stopping never waits for a write or a join in progress.
	bgCtx    context.Context
	bgCancel context.CancelFunc
}

// Open starts a node: its Raft instance on DataDir, its transport, its
// gossip member, and the background work (joining, leader duties).
func Open(cfg Config) (*Node, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := makePrivate(cfg.DataDir, cfg.Logger.With(slog.String("node_id", cfg.NodeID))); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With(slog.String("node_id", cfg.NodeID)), fsm: fsm.New(), stop: make(chan struct{}),
		failed: make(chan struct{}), closed: make(chan struct{}), metrics: newNodeMetrics()}
	n.refusals = nodeauth.NewRefusals(n.log)
	n.bgCtx, n.bgCancel = context.WithCancel(context.Background())
	n.fsm.Observe(n.observe, fsm.TypeNode, fsm.TypeNodeRemoved, fsm.TypeCancel)
	n.cache = gossip.NewCache(cfg.DataDir, n.log)
	if cfg.TLS != nil {
		t, err := nodeauth.LoadTLS(*cfg.TLS, n.log)
		if err != nil {
			return nil, err
		}
		n.tls = t
	}
	n.client = peer.NewClient(peer.ClientConfig{NodeID: cfg.NodeID, ClusterKey: cfg.ClusterKey, TLS: n.tls, WrapDial: cfg.Hooks.Dial})
	n.fwd = forward.New(n.client, fwdObserver{n.metrics})
	ok := false
	defer func() {
		if !ok {
			n.closeParts()
		}
	}()

	var err error
	n.bolt, err = raftlog.OpenBolt(filepath.Join(cfg.DataDir, "raft.db"))
	if err != nil {
		return nil, err
	}
	if n.ledger, err = fsm.OpenLedger(filepath.Join(cfg.DataDir, "audit.db")); err != nil {
		return nil, err
	}
	n.fsm.SetLedger(n.ledger)
	snaps, err := newPrivateSnapshots(cfg.DataDir, 2, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("cluster: snapshot store: %w", err)
	}
	var ident *nodeauth.IdentityStream
	n.transport, ident, err = newTransport(cfg, n.tls, n.refusals)
	if err != nil {
		return nil, err
	}
	logStore, logPath, err := raftlog.OpenLog(cfg.DataDir, cfg.RaftLog, n.bolt, n.log)
	if err != nil {
		return nil, err
	}
	n.walLog, _ = logStore.(*raftlog.WAL)
	hasState, err := raft.HasExistingState(logStore, n.bolt, snaps)
	if err != nil {
		return nil, fmt.Errorf("cluster: reading state: %w", err)
	}
	// The cache keeps the latest entries in memory, so the leader sends
	// them to followers without reading them back from the disk.
	// Beneath it, the leader's writes are queued (raftlog.QueuedLog), and the
	// state machine and the followers' commit index wait for them.
	var durable raft.LogStore = countingLogStore{LogStore: logStore, m: n.metrics}
	if cfg.Hooks.LogStore != nil {
		durable = cfg.Hooks.LogStore(durable)
	}
	n.logs = raftlog.NewQueuedLog(durable, logPath)
	if n.walLog != nil {
		// A leader refuses new calls once the WAL cannot keep its margin,
		// while the entries on their way are written into it.
		n.logs.SetSpaceCheck(n.walLog.EnsureMargin)
	}
	logs, err := raft.NewLogCache(logCacheSize, n.logs)
	if err != nil {
		return nil, fmt.Errorf("cluster: log cache: %w", err)
	}
	// Raft's main loop may lead (and write) before NewRaft returns: until
	// r is set, writes are synchronous, which is always safe.
	var r atomic.Pointer[raft.Raft]
	n.logs.SetLeaderCheck(func() bool { rr := r.Load(); return rr != nil && rr.State() == raft.Leader })
	n.reserve = raftlog.NewReserve(cfg.DataDir, n.log)
	n.reserve.Ensure()
	n.raft, err = raft.NewRaft(n.raftConfig(), raftlog.GatedFSM(n.fsm, n.logs), logs, raftlog.ReservedStable(n.bolt, n.reserve), snaps,
		raftlog.CappedTransport(n.transport, n.logs))
	if err != nil {
		return nil, fmt.Errorf("cluster: starting raft: %w", err)
	}
	r.Store(n.raft)
	ident.SetLookup(func(addr string) string { return nodeauth.ServerAt(n.raft, addr) })
	n.proposer = newProposer(n.raft, n.metrics)
	if !hasState && cfg.Bootstrap {
		if err := n.bootstrapSelf(); err != nil {
			return nil, err
		}
		n.log.Info("bootstrapped a new cluster")
	}
	if err := n.startGossip(); err != nil {
		return nil, err
	}
	if cfg.Metrics != nil {
		if err := n.registerMetrics(cfg.Metrics); err != nil {
			return nil, fmt.Errorf("cluster: metrics: %w", err)
		}
	}
	n.background(n.observeLeaderChanges)
	n.background(n.watchDiskFull)
	n.background(n.leaderDuties)
	n.background(n.watchSilence)
	n.background(n.gossipRejoin)
	if hasState {
		n.background(n.rejoinOnNewAddress)
	}
	// A node that joins registers its addresses once the join is over:
	// the join itself records them, and a registration racing it would
	// write them a second time.
	switch {
	case !hasState && cfg.BootstrapUnlessCluster:
		n.background(func() {
			if n.bootstrapUnlessCluster() {
				n.registerSelf()
			}
		})
	case !hasState && !cfg.Bootstrap && len(cfg.Join) > 0:
		n.background(func() {
			if n.joinCluster() {
				n.registerSelf()
			}
		})
	case !hasState && !cfg.Bootstrap:
		n.log.Warn("no state, no --bootstrap and no --join: waiting to be added by an operator (POST /v1/cluster/nodes)")
		n.background(n.registerSelf)
	default:
		n.background(n.registerSelf)
	}
	ok = true
	n.log.Info("node started", slog.String("raft_addr", string(n.transport.LocalAddr())),
		slog.String("gossip_addr", n.GossipAddr()), slog.Bool("existing_state", hasState))
	return n, nil
}

// logCacheSize is how many of the latest log entries are kept in memory:
// a few rounds of the largest batches (MaxAppendEntries).
const logCacheSize = 1024

// Raft's timing and batching (docs/operations.md#overload: load alone causes no leader
// change).
//
// heartbeatTimeout is Raft's heartbeat and election timeout, and
// leaderLeaseTimeout the leader's lease. hashicorp/raft's defaults (1 s,
// 1 s, 500 ms) are met on a quiet host, but not on one whose cores are
// shared: with three busy processes beside the nodes on 2 cores (a node
// then gets a third of a core or less) and a burst of large results, a
// leader missed its 500 ms lease ("failed to contact quorum, stepping
// down") and the cluster changed leaders under load alone (issue 29). The
// lease is therefore as long as it may be: just under the heartbeat
// timeout, since Raft refuses a lease longer than that timeout, and the
// silence check (silence.go) lowers the timeout by a nanosecond to make
// Raft check a silent leader at once. The heartbeat timeout stays 1 s: a
// crashed leader is replaced about a second after it fell silent
// (measured with scripts/bench failover: 2 s timers stalled writes for
// 3.9-5.4 s). A follower starved for longer than that only asks for a
// pre-vote, which the others refuse while they hear from the leader.
// Config.Fast shortens them for loopback tests.
//
// maxAppendEntries bounds the entries of one AppendEntries. With entries
// of up to maxEntryBytes, one request carries at most 64 MiB: a follower
// decodes and writes it in a bounded time, and the leader's memory for
// replication stays bounded, however many large results complete at once
// (at 256 entries of up to 4 MiB, one request could have held a GiB).
// Ordinary rounds are one entry each, far below the bound.
const (
	heartbeatTimeout   = time.Second
	leaderLeaseTimeout = 900 * time.Millisecond
	maxAppendEntries   = 64
)

func (n *Node) raftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(n.cfg.NodeID)
	c.Logger = newHCLog(n.cfg.Logger, "raft")
	c.ShutdownOnRemove = false
	c.BatchApplyCh = true
	c.MaxAppendEntries = maxAppendEntries
	c.SnapshotThreshold = n.cfg.SnapshotThreshold
	c.SnapshotInterval = n.cfg.SnapshotInterval
	c.TrailingLogs = 10240
	c.CommitTimeout = 5 * time.Millisecond
	c.HeartbeatTimeout = heartbeatTimeout
	c.ElectionTimeout = heartbeatTimeout
	c.LeaderLeaseTimeout = leaderLeaseTimeout
	if n.cfg.Fast {
		c.HeartbeatTimeout = 700 * time.Millisecond
		c.ElectionTimeout = 700 * time.Millisecond
		c.LeaderLeaseTimeout = 500 * time.Millisecond
	}
	return c
}

// background runs fn in a goroutine that Close waits for.
func (n *Node) background(fn func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn()
	}()
}

// stopped reports whether Close has begun.
func (n *Node) stopped() bool {
	select {
	case <-n.stop:
		return true
	default:
		return false
	}
}

// sleep waits d or until Close; false when closing.
func (n *Node) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-n.stop:
		return false
	case <-t.C:
		return true
	}
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// RaftAddr returns the Raft transport's address.
func (n *Node) RaftAddr() string { return string(n.transport.LocalAddr()) }

// HTTPAddr returns the node's advertised HTTP address.
func (n *Node) HTTPAddr() string { return n.cfg.HTTPAddr }

// FSM returns the node's state machine (for reads and tests).
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// Raft returns the node's Raft instance (for tests and tools).
func (n *Node) Raft() *raft.Raft { return n.raft }

// IsLeader reports whether this node is the leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Info returns this node's addresses.
func (n *Node) Info() NodeInfo { return n.info() }

// info returns this node's addresses as the member table records them.
func (n *Node) info() fsm.NodeInfo {
	return fsm.NodeInfo{ID: n.cfg.NodeID, RaftAddr: n.RaftAddr(), HTTPAddr: n.cfg.HTTPAddr, GossipAddr: n.GossipAddr()}
}

// HandOff transfers leadership to another voter when this node leads, so
// that a graceful stop does not wait for an election timeout. It is a
// no-op on a follower or a single-voter cluster.
func (n *Node) HandOff() {
	if !n.IsLeader() {
		return
	}
	cfg := n.raft.GetConfiguration()
	if cfg.Error() != nil || len(cfg.Configuration().Servers) < 2 {
		return
	}
	if err := n.raft.LeadershipTransfer().Error(); err != nil {
		n.log.Warn("leadership transfer failed", slog.Any("err", err))
		return
	}
	n.log.Info("handed leadership over")
	// The transfer is an admin action of this node, recorded in the
	// ledger through the new leader (best effort: the node is stopping).
	if _, id := n.raft.LeaderWithID(); id != "" {
		ctx, cancel := context.WithTimeout(n.bgCtx, 2*time.Second)
		defer cancel()
		if _, err := n.Apply(ctx, fsm.Admin(string(audit.KindTransfer), string(id))); err != nil {
			n.log.Warn("recording the leadership transfer in the audit ledger failed", slog.Any("err", err))
		}
	}
}

// ErrShutdownTimeout is returned (wrapped) by Close and CloseContext when
// the node did not stop in time: its parts (Raft, its transport, the
// log store) finish stopping in the background, and the data dir stays
// locked by this process until they have.
var ErrShutdownTimeout = errors.New("cluster: the node did not shut down in time")

// Close stops the node: it hands leadership over, leaves the gossip pool
// and shuts Raft down. The node stays in the Raft configuration. It takes
// at most Config.ShutdownTimeout: past it, it returns an error matching
// ErrShutdownTimeout. Calls after the first wait for the same shutdown.
func (n *Node) Close() error { return n.CloseContext(context.Background()) }

// CloseContext is Close, bounded also by ctx: it returns when the node has
// stopped, or with an error matching ErrShutdownTimeout when
// Config.ShutdownTimeout passes or ctx ends first.
func (n *Node) CloseContext(ctx context.Context) error {
	n.closeOnce.Do(func() {
		go func() {
			n.closeErr = n.close()
			close(n.closed)
		}()
	})
	t := time.NewTimer(n.cfg.ShutdownTimeout)
	defer t.Stop()
	select {
	case <-n.closed:
		return n.closeErr
	case <-t.C:
	case <-ctx.Done():
	}
	n.log.Error("the node did not shut down in time; its parts keep stopping in the background",
		slog.Duration("shutdown_timeout", n.cfg.ShutdownTimeout))
	return fmt.Errorf("%w (within %s)", ErrShutdownTimeout, n.cfg.ShutdownTimeout)
}

func (n *Node) close() error {
	n.HandOff()
	n.stopOnce.Do(func() { close(n.stop) })
	// A log write waiting for disk space is given up, so that what waits
	// on it (an apply, Raft's shutdown) ends.
	n.logs.Abandon()
	n.bgCancel()
	n.fwd.Close()
	n.streams.closeAll()
	if n.gossip != nil {
		_ = n.gossip.Leave(time.Second)
	}
	n.wg.Wait()
	return n.closeParts()
}

func (n *Node) closeParts() error {
	n.bgCancel()
	var errs []error
	if n.gossip != nil {
		errs = append(errs, n.gossip.Shutdown())
	}
	if n.raft != nil {
		errs = append(errs, n.raft.Shutdown().Error())
	}
	if n.transport != nil {
		errs = append(errs, n.transport.Close())
	}
	if n.logs != nil {
		errs = append(errs, n.logs.Close())
	}
	if n.walLog != nil {
		errs = append(errs, n.walLog.Close())
	}
	if n.bolt != nil {
		errs = append(errs, n.bolt.Close())
	}
	if n.ledger != nil {
		errs = append(errs, n.ledger.Close())
	}
	n.client.Close()
	return errors.Join(errs...)
}

// OnCancel installs the function told when a cancel of one of this node's
// executions is applied, so the tool's context is cancelled wherever the
// cancel was asked.
func (n *Node) OnCancel(fn func(executionID string)) {
	n.onCancelMu.Lock()
	n.onCancel = fn
	n.onCancelMu.Unlock()
}

// observe sees every applied command (on Raft's apply goroutine).
func (n *Node) observe(_ uint64, c fsm.Command, r fsm.Response) {
	if c.Type == fsm.TypeNode || c.Type == fsm.TypeNodeRemoved {
		members := n.fsm.Nodes()
		n.cache.Put(members)
		return
	}
	if c.Type != fsm.TypeCancel || r.Code != "" || r.Record.NodeID != n.cfg.NodeID {
		return
	}
	n.onCancelMu.RLock()
	fn := n.onCancel
	n.onCancelMu.RUnlock()
	if fn != nil {
		go fn(c.ExecutionID)
	}
}
