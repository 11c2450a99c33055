package carmy

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/carmyhq/carmy/store"
)

// runtimeMetrics are the runtime's Prometheus instruments.
type runtimeMetrics struct {
	toolDuration  *prometheus.HistogramVec
	storeDuration *prometheus.HistogramVec
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
	}
}

// registerMetrics adds the runtime's metrics to reg: its instruments, gauges of
// its store and running executions, and the Go and process collectors.
func (r *Runtime) registerMetrics(reg *prometheus.Registry) {
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
	reg.MustRegister(
		r.metrics.toolDuration,
		r.metrics.storeDuration,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_store_entries",
			Help: "Records in the store (running, interrupted and finished), as this node has applied them.",
		}, stat(func(s store.Stats) int { return s.Entries })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_store_capacity",
			Help: "The bound on records (--max-entries); calls answer IDEMPOTENCY_CAPACITY when it is reached.",
		}, stat(func(s store.Stats) int { return s.Capacity })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "carmy_executions_running",
			Help: "Tools running on this node now.",
		}, func() float64 { return float64(r.runs.len()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
}

// Metrics returns the registry of this runtime's Prometheus metrics, which
// the API serves at GET /metrics. Register more collectors (a cluster
// node's, an application's) with it before serving.
func (r *Runtime) Metrics() *prometheus.Registry { return r.reg }

// reserveOutcome names a Reserve outcome for carmy_store_write_duration_seconds.
func reserveOutcome(o store.Outcome, err error) string {
	if err != nil {
		return "error"
	}
	switch o {
	case store.Reserved:
		return "reserved"
	case store.Replay:
		return "replay"
	case store.Conflict:
		return "conflict"
	case store.Uncertain:
		return "uncertain"
	}
	return "error"
}
