package carmy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/carmyhq/carmy/engine"
)

// Runtime is Carmy as a Go program embeds it: the tool runtime (an
// *engine.Runtime, whose methods it has: Tool, AddTool, IdempotencyStore,
// Call, Shutdown, …) with its Prometheus metrics, ready to serve the HTTP
// API (Run, ListenAndServe, Serve). Build one with App.
type Runtime struct {
	*engine.Runtime
	reg *prometheus.Registry
}

// App returns a new runtime with the default configuration changed by
// opts, backed by the default bounded in-memory store, and a Prometheus
// registry of its metrics (Metrics).
func App(opts ...Option) *Runtime {
	m := newRuntimeMetrics()
	rt := engine.New(append([]Option{engine.WithObserver(m)}, opts...)...)
	reg := prometheus.NewRegistry()
	m.register(reg, rt)
	return &Runtime{Runtime: rt, reg: reg}
}
