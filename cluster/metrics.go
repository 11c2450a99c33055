package cluster

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/carmyhq/carmy/cluster/peer"
	"github.com/carmyhq/carmy/store"
)

// nodeMetrics are a node's own Prometheus instruments. They always exist
// (so the code that updates them needs no nil checks); Open registers them
// with Config.Metrics when that is set.
type nodeMetrics struct {
	// Log writes: one per StoreLogs, i.e. one BoltDB transaction and its
	// fsyncs, however many entries it carries.
	logWrites  prometheus.Counter
	logEntries prometheus.Counter

	// Commands this node committed as leader, by how they arrived.
	applies       *prometheus.CounterVec
	applyDuration prometheus.Histogram

	// Forwarding from this node (a follower) to the leader.
	fwdBatches   prometheus.Counter
	fwdCommands  prometheus.Counter
	fwdErrors    *prometheus.CounterVec
	fwdDuration  prometheus.Histogram
	fwdBatchSize prometheus.Histogram

	leaderChanges prometheus.Counter

	// Group commit on the leader.
	roundCommands prometheus.Histogram

	// Calls refused because the log waits for disk space.
	diskFullRefusals prometheus.Counter
}

// latencyBuckets suit sub-millisecond to multi-second waits.
var latencyBuckets = []float64{.0002, .0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10}

func newNodeMetrics() *nodeMetrics {
	return &nodeMetrics{
		logWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "carmy_raft_log_writes_total",
			Help: "Writes to the Raft log store: each is one append to its WAL (one fdatasync; a BoltDB transaction with --raft-log bolt), however many entries it carries.",
		}),
		logEntries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "carmy_raft_log_entries_total",
			Help: "Entries written to the Raft log store.",
		}),
		applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "carmy_raft_applies_total",
			Help: "Commands this node proposed as leader, by origin (local, or forwarded by a follower) and result.",
		}, []string{"origin", "result"}),
		applyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "carmy_raft_apply_duration_seconds",
			Help:    "Time from proposing a command as leader to its applied response (commit plus apply).",
			Buckets: latencyBuckets,
		}),
		fwdBatches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "carmy_forward_batches_total",
			Help: "Requests that carried commands from this follower to the leader.",
		}),
		fwdCommands: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "carmy_forward_commands_total",
			Help: "Commands this follower forwarded to the leader.",
		}),
		fwdErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "carmy_forward_errors_total",
			Help: "Forwarded commands that did not get a response, by kind (not_sent, not_leader, commit_unknown, other).",
		}, []string{"kind"}),
		fwdDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "carmy_forward_duration_seconds",
			Help:    "Round trip of one forwarded batch to the leader.",
			Buckets: latencyBuckets,
		}),
		fwdBatchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "carmy_forward_batch_commands",
			Help:    "Commands per forwarded batch.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512},
		}),
		roundCommands: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "carmy_raft_round_commands",
			Help:    "Commands per group-commit round on the leader; a round is one log entry (a batch), written with one log write on every node.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024},
		}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "carmy_raft_leader_changes_total",
			Help: "Times this node saw the leader change (including to none).",
		}),
		diskFullRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "carmy_raft_log_disk_full_refusals_total",
			Help: "New calls this node refused (503, before reserving) because its Raft log could not be written for want of disk space.",
		}),
	}
}

// registerMetrics adds the node's instruments, its state gauges and the Raft,
// memberlist and BoltDB metrics (routed from go-metrics) to reg.
func (n *Node) registerMetrics(reg prometheus.Registerer) error {
	m := n.metrics
	// Every kind at 0 from the start, so that rate() and alerts see the
	// series before the first error.
	for _, kind := range []string{"not_sent", "not_leader", "commit_unknown", "other"} {
		m.fwdErrors.WithLabelValues(kind)
	}
	cs := []prometheus.Collector{
		m.logWrites, m.logEntries, m.applies, m.applyDuration,
		m.fwdBatches, m.fwdCommands, m.fwdErrors, m.fwdDuration, m.fwdBatchSize,
		m.leaderChanges, m.roundCommands,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_raft_state",
			Help: "This node's Raft state: 0 follower, 1 candidate, 2 leader, 3 shutdown.",
		}, func() float64 { return float64(n.raft.State()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_raft_term",
			Help: "This node's current Raft term; it grows with every election, so a change means the cluster held one.",
		}, func() float64 { return float64(n.raft.CurrentTerm()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_raft_commit_index",
			Help: "The highest log index this node knows committed.",
		}, func() float64 { return float64(n.raft.CommitIndex()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_raft_applied_index",
			Help: "The last log index this node's state machine applied.",
		}, func() float64 { return float64(n.fsm.AppliedIndex()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_raft_last_contact_seconds",
			Help: "Time since this node last heard from the leader (0 on the leader).",
		}, func() float64 {
			if n.IsLeader() {
				return 0
			}
			lc := n.raft.LastContact()
			if lc.IsZero() {
				return -1
			}
			return time.Since(lc).Seconds()
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_raft_voters",
			Help: "Voters in the Raft configuration as this node knows it.",
		}, func() float64 { return float64(n.voters()) }),
	}
	cs = append(cs, n.diskFullCollectors()...)
	cs = append(cs, goMetricsCollectors()...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var dup prometheus.AlreadyRegisteredError
			if errors.As(err, &dup) {
				continue
			}
			return err
		}
	}
	return nil
}

// voters counts the voters of the latest configuration.
func (n *Node) voters() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	count := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			count++
		}
	}
	return count
}

// countingLogStore counts the writes to a Raft log store. It adds nothing
// else: every other method is the wrapped store's.
type countingLogStore struct {
	raft.LogStore
	m *nodeMetrics
}

// StoreLog implements raft.LogStore.
func (s countingLogStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs implements raft.LogStore.
func (s countingLogStore) StoreLogs(logs []*raft.Log) error {
	err := s.LogStore.StoreLogs(logs)
	if err == nil {
		s.m.logWrites.Inc()
		s.m.logEntries.Add(float64(len(logs)))
	}
	return err
}

// fwdObserver counts what the forwarder does (forward.Observer).
type fwdObserver struct{ m *nodeMetrics }

// Batch implements forward.Observer.
func (o fwdObserver) Batch(commands int, took time.Duration) {
	o.m.fwdBatches.Inc()
	o.m.fwdCommands.Add(float64(commands))
	o.m.fwdBatchSize.Observe(float64(commands))
	o.m.fwdDuration.Observe(took.Seconds())
}

// Failed implements forward.Observer.
func (o fwdObserver) Failed(err error) { o.m.fwdErrors.WithLabelValues(errKind(err)).Inc() }

// errKind names a forwarding error for carmy_forward_errors_total.
func errKind(err error) string {
	switch {
	case errors.Is(err, peer.ErrNotSent):
		return "not_sent"
	case errors.Is(err, peer.ErrNotLeader):
		return "not_leader"
	case errors.Is(err, store.ErrCommitUnknown):
		return "commit_unknown"
	}
	return "other"
}

// observeLeaderChanges counts leader changes seen by Raft's observer.
func (n *Node) observeLeaderChanges() {
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	for {
		select {
		case <-n.stop:
			return
		case <-ch:
			n.metrics.leaderChanges.Inc()
		}
	}
}

// IsMonotonic implements raft.MonotonicLogStore as the wrapped store does.
func (s countingLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}
