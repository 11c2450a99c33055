// Package carmy runs tools for AI agents and makes their retries safe.
//
// It is the facade a Go program embeds, like etcd's embed: App returns a
// Runtime, which is the tool runtime of package engine (every method of
// *engine.Runtime is a method of Runtime) together with its Prometheus
// metrics, ready to serve the HTTP API of package api:
//
//	app := carmy.App()
//	app.Tool("create_order", createOrder) // func(ctx context.Context, call carmy.Call) (any, error)
//	app.IdempotencyStore(myBackend)       // default: store.NewMemory(store.DefaultCapacity); carmy.Basic{Store: myStore}
//	err := app.Run(ctx)                   // serves the HTTP API until ctx is done
//
// The runtime's types (Call, Caller, Request, ToolSpec, …) and options are
// aliases of package engine's, which documents the contract of a call.
//
// Dependencies point one way: cmd/carmy → carmy → api → engine → store.
// This package assembles the runtime, the API, the runtime's metrics
// (engine reports to an engine.Observer, implemented here with
// Prometheus) and TLS; nothing it imports imports it. A program that
// needs no HTTP uses package engine alone and links no Echo or
// Prometheus. StartNode runs a whole node — the runtime on a Raft
// cluster member or a PostgreSQL fleet node (its engine.Backend), the
// API, MCP, the gateway and the console — and Node.Close stops it in
// order; the binary (cmd/carmy serve) is a thin shell over it.
package carmy
