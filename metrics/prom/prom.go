// Package prom is Carmy's metrics in Prometheus: every metric of
// docs/operations.md#metrics, with its name, labels, help and buckets, on
// a registry of its own, served at GET /metrics.
//
// A Metrics is the API's api.Metrics (give it as api.Config.Metrics) and
// the runtime's engine.Observer (New attaches it). Package embed (a node,
// as carmy serve runs it) wires one in by itself; a program that serves
// with carmy.Runtime.Serve and wants /metrics gives one:
//
//	app := carmy.App()
//	m := prom.New(app.Engine())
//	err := app.Serve(ctx, ln, api.Config{Metrics: m})
//
// The root package and package api link no Prometheus: only a program
// that imports this package does.
package prom

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/buildinfo"
)

// Metrics is Carmy's Prometheus instruments on one registry: the API's
// (calls, audited actions, refused credentials), the runtime's (tools,
// store writes, refusals, probes, the store's gauges) when made with a
// runtime, the build's, and the Go runtime's and the process's. Safe for
// concurrent use.
type Metrics struct {
	reg *prometheus.Registry
	*apiMetrics
	*runtimeMetrics
}

var (
	_ api.Metrics            = (*Metrics)(nil)
	_ engine.Observer        = (*Metrics)(nil)
	_ engine.RefusalObserver = (*Metrics)(nil)
	_ engine.ProbeObserver   = (*Metrics)(nil)
	_ engine.NotifyObserver  = (*Metrics)(nil)
)

// New returns the metrics of a node on a new registry, and attaches them
// to rt (engine.Runtime.AddObserver), whose gauges it reads at each
// scrape: call it before rt takes its first call. A nil rt gives the
// API's metrics alone (and the build's, Go's and the process's). A
// second New of one runtime makes a second registry, told the same.
func New(rt *engine.Runtime) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), apiMetrics: newAPIMetrics(), runtimeMetrics: newRuntimeMetrics()}
	m.apiMetrics.register(m.reg)
	if rt != nil {
		m.runtimeMetrics.register(m.reg, rt)
		rt.AddObserver(m)
	}
	m.reg.MustRegister(
		buildInfoGauge(),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Registry returns the registry of the metrics, which Handler serves.
// Register more collectors (a cluster node's, an application's) with it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler implements api.Metrics: the registry in Prometheus's text
// format, a collector's failure logged to log at WARN and the rest still
// served.
func (m *Metrics) Handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:          promLogger{log},
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: false,
	})
}

// promLogger logs the metrics handler's errors.
type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) { l.log.Warn("serving metrics", "err", v) }

// buildInfoGauge is carmy_build_info{version,commit,go_version}, always 1:
// the build this node runs (internal/buildinfo).
func buildInfoGauge() prometheus.Collector {
	bi := buildinfo.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "carmy_build_info",
		Help:        "Always 1; its labels name the build of Carmy this node runs: version, commit and the Go version.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "commit": bi.Commit, "go_version": bi.GoVersion},
	})
	g.Set(1)
	return g
}
