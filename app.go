package carmy

import (
	"github.com/carmyhq/carmy/engine"
)

// Runtime is Carmy as a Go program embeds it: the tool runtime of package
// engine, ready to serve the HTTP API (Run,
// ListenAndServe, Serve) or to take calls without HTTP (Call). Build one
// with App. Its methods are those a library user calls (runtime.go); the
// wiring of a server (starting in the background, the reconcile probes'
// owner, cancelling a run by id) stays inside the packages that assemble
// one, which reach it through Engine. Safe for concurrent use.
type Runtime struct {
	rt *engine.Runtime
}

// App returns a new runtime with the default configuration changed by
// opts, backed by the default bounded in-memory store. It keeps no
// metrics: package metrics/prom does (prom.New(app.Engine()), given to
// Serve as api.Config.Metrics), and package embed wires it into a node.
func App(opts ...Option) *Runtime {
	return &Runtime{rt: engine.New(opts...)}
}

// Engine returns the engine runtime beneath r, for the code that wires it
// into a server or a node: package embed (the backend and the probes'
// owner), an upstream MCP server's registry (mcpgateway.New), api.New,
// the metrics (prom.New).
// Calls and tools go through r's own methods; what Engine adds is the
// assembly's, and a program that serves with Serve or embed.StartNode
// does not call it.
func (r *Runtime) Engine() *engine.Runtime { return r.rt }
