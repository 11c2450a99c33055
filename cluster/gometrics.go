package cluster

import (
	"log/slog"
	"sync"

	armonmetrics "github.com/armon/go-metrics"
	armonprom "github.com/armon/go-metrics/prometheus"
	gometrics "github.com/hashicorp/go-metrics"
	hcprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// Raft and memberlist report through github.com/hashicorp/go-metrics, and
// raft-boltdb through github.com/armon/go-metrics; both keep a global sink
// per process. goMetricsCollectors installs a Prometheus sink in each, once
// per process, and returns them as collectors for a node's registry. Their
// names start with carmy_ (carmy_raft_commitTime, carmy_raft_boltdb_…,
// carmy_memberlist_…); timings are in milliseconds, as go-metrics reports
// them. Several nodes in one process (tests) share these sinks.
var goMetricsCollectors = sync.OnceValue(func() []prometheus.Collector {
	var out []prometheus.Collector
	hc, err := hcprom.NewPrometheusSinkFrom(hcprom.PrometheusOpts{
		Name:       "carmy_gometrics_sink",
		Registerer: prometheus.NewRegistry(), // only to satisfy the constructor; nodes register the sink themselves
	})
	if err == nil {
		conf := gometrics.DefaultConfig("carmy")
		conf.EnableHostname = false
		conf.EnableRuntimeMetrics = false
		if _, err = gometrics.NewGlobal(conf, hc); err == nil {
			out = append(out, hc)
		}
	}
	if err != nil {
		slog.Warn("raft and memberlist metrics are not exported", slog.Any("err", err))
	}
	ar, err := armonprom.NewPrometheusSinkFrom(armonprom.PrometheusOpts{
		Name:       "carmy_armonmetrics_sink",
		Registerer: prometheus.NewRegistry(),
	})
	if err == nil {
		conf := armonmetrics.DefaultConfig("carmy")
		conf.EnableHostname = false
		conf.EnableRuntimeMetrics = false
		if _, err = armonmetrics.NewGlobal(conf, ar); err == nil {
			out = append(out, ar)
		}
	}
	if err != nil {
		slog.Warn("BoltDB metrics are not exported", slog.Any("err", err))
	}
	return out
})
