// Package carmy runs tools for AI agents and makes their retries safe.
//
// It is the library a Go program embeds the runtime with: App returns a
// Runtime, the tool runtime of package engine, which takes calls without
// HTTP (Call) or serves the HTTP API of package api on a listener of the
// program's (Serve, ListenAndServe, Run):
//
//	app := carmy.App()
//	app.Tool("create_order", createOrder) // func(ctx context.Context, call carmy.Call) (any, error)
//	app.IdempotencyStore(myBackend)       // default: store.NewMemory(store.DefaultCapacity); carmy.Basic{Store: myStore}
//	err := app.Run(ctx)                   // serves the HTTP API until ctx is done
//
// The runtime's types (Call, Caller, Request, ToolSpec, …) and options are
// aliases of package engine's, which documents the contract of a call.
// Runtime wraps the engine's runtime: its methods are those a library
// user calls; Engine gives the engine runtime to the code that wires one
// into a server.
//
// Dependencies point one way: cmd/carmy → embed → carmy → api → engine →
// store. This package assembles the runtime, the API and TLS; it links no
// back end (no Raft, memberlist or PostgreSQL driver), no Prometheus and
// no MCP SDK (engine/layout_test.go checks it): /metrics and /mcp are
// served when Serve is given them, as api.Config.Metrics (package
// metrics/prom: prom.New(app.Engine())) and api.Config.MCP (package
// api/mcp: mcp.Endpoint). A whole node — the
// runtime on a Raft cluster member or a PostgreSQL fleet node, the API,
// MCP, the gateway and the console — is package embed's StartNode; the
// binary (cmd/carmy serve) is a thin shell over it. A program that needs
// no HTTP uses package engine alone and links no Echo or Prometheus.
package carmy
