package prom

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// runtimeMetrics are the runtime's Prometheus instruments: an
// engine.Observer, so that package engine needs no Prometheus. Those of a
// Metrics made without a runtime are never registered nor told anything.
type runtimeMetrics struct {
	toolDuration  *prometheus.HistogramVec
	storeDuration *prometheus.HistogramVec
	refused       *prometheus.CounterVec
	probes        *prometheus.CounterVec
	notified      *prometheus.CounterVec
}

// durationBuckets suit tools and store writes alike: 0.2 ms to 60 s.
var durationBuckets = []float64{.0002, .0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 30, 60}

func newRuntimeMetrics() *runtimeMetrics {
	return &runtimeMetrics{
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "carmy_tool_duration_seconds",
			Help:    "How long tools ran, by tool and recorded status (completed, failed, timed_out, cancelled).",
			Buckets: durationBuckets,
		}, []string{"tool", "status"}),
		storeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "carmy_store_write_duration_seconds",
			Help: "Store writes of calls: reserve (by outcome: reserved, replay, conflict, uncertain, error) " +
				"and complete (ok, error). A replicated store's reserve and complete are Raft commits; " +
				"a replay of a finished record is answered locally.",
			Buckets: durationBuckets,
		}, []string{"op", "outcome"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "carmy_calls_refused_total",
			Help: "Calls this node refused before reserving anything because it runs too many tools, by the limit reached: " +
				"max_running, max_running_per_principal, admin_reserve, max_inflight_bytes.",
		}, []string{"reason"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "carmy_reconcile_probes_total",
			Help: "Reconcile probes of interrupted executions, by tool and outcome: completed (found: resolved completed), " +
				"released (not found), undecided (tried again), gave_up (past give_up_after), settled (no longer interrupted).",
		}, []string{"tool", "outcome"}),
		notified: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "carmy_approval_notifications_total",
			Help: "Approval notify webhooks this node sent, by result: sent (a 2xx answer), failed (an attempt without one, tried again), " +
				"gave_up (the gate expired, or the node stopped, before a 2xx), dropped (too many pending).",
		}, []string{"result"}),
	}
}

// ApprovalNotified implements engine.NotifyObserver: carmy_approval_notifications_total.
func (m *runtimeMetrics) ApprovalNotified(result string) { m.notified.WithLabelValues(result).Inc() }

// Probed implements engine.ProbeObserver: carmy_reconcile_probes_total.
func (m *runtimeMetrics) Probed(tool, outcome string) { m.probes.WithLabelValues(tool, outcome).Inc() }

// Refused implements engine.RefusalObserver: carmy_calls_refused_total.
func (m *runtimeMetrics) Refused(reason string) { m.refused.WithLabelValues(reason).Inc() }

// ToolFinished implements engine.Observer: carmy_tool_duration_seconds.
func (m *runtimeMetrics) ToolFinished(tool string, status store.Status, took time.Duration) {
	m.toolDuration.WithLabelValues(tool, string(status)).Observe(took.Seconds())
}

// StoreWrite implements engine.Observer: carmy_store_write_duration_seconds.
func (m *runtimeMetrics) StoreWrite(op, outcome string, took time.Duration) {
	m.storeDuration.WithLabelValues(op, outcome).Observe(took.Seconds())
}

// register adds to reg the instruments, and gauges of r's store, running
// executions and bytes in flight.
func (m *runtimeMetrics) register(reg *prometheus.Registry, r *engine.Runtime) {
	stat := func(f func(store.Stats) int) func() float64 {
		return func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			s, err := r.Store().Stats(ctx)
			if err != nil {
				return -1
			}
			return float64(f(s))
		}
	}
	for _, reason := range []string{engine.LimitMaxRunning, engine.LimitMaxRunningPerPrincipal, engine.LimitAdminReserve} {
		m.refused.WithLabelValues(reason)
	}
	for _, result := range []string{engine.NotifySent, engine.NotifyFailed, engine.NotifyGaveUp, engine.NotifyDropped} {
		m.notified.WithLabelValues(result)
	}
	reg.MustRegister(
		m.toolDuration,
		m.storeDuration,
		m.refused,
		m.probes,
		m.notified,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_store_entries",
			Help: "Records in the store (running, interrupted and finished), as this node has applied them.",
		}, stat(func(s store.Stats) int { return s.Entries })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_store_capacity",
			Help: "The bound on records (--max-entries); calls answer IDEMPOTENCY_CAPACITY when it is reached.",
		}, stat(func(s store.Stats) int { return s.Capacity })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_store_bytes",
			Help: "Bytes of the records in the store (store.RecordSize summed: keys, ids, fingerprints, result data and errors), as this node has applied them.",
		}, stat(func(s store.Stats) int { return int(s.Bytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_store_max_bytes",
			Help: "The bound on carmy_store_bytes (--max-bytes; 0: none); calls answer IDEMPOTENCY_CAPACITY when a new record would not fit.",
		}, stat(func(s store.Stats) int { return int(s.MaxBytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_executions_interrupted",
			Help: "Interrupted executions (their runner died) in the store, as this node has applied them: each answers EXECUTION_UNCERTAIN until an operator resolves it. 0 for a backend that cannot count them (engine.Basic); -1 when the count failed.",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			n, err := r.Store().Interrupted(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_executions_running",
			Help: "Tools running on this node now.",
		}, func() float64 { return float64(r.Running()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_inflight_bytes",
			Help: "Bytes of arguments and results the calls on this node hold in flight (until their outcome is recorded).",
		}, func() float64 { return float64(r.InflightBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_inflight_bytes_limit",
			Help: "The bound on carmy_inflight_bytes past which new calls are refused before reserving (--max-inflight-bytes; 0: none).",
		}, func() float64 { return float64(r.MaxInflightBytes()) }),
	)
}
