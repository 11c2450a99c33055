// Package mcp serves the Model Context Protocol at /mcp (docs/mcp.md): the
// Streamable HTTP transport, stateless, built on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), so that any node answers any
// request and every MCP client gets Carmy's guarantees without glue code.
//
// A tools/call is an ordinary call of the runtime: its identity comes from
// the caller's bearer token and from params._meta (carmy/request_id,
// carmy/session_id or the Carmy-Session-Id header), its fingerprint from
// the tool, the arguments and carmy/metadata, exactly as for
// POST /v1/tools/call. A call made over MCP and one made over HTTP with the
// same identity are the same call: one replays the other.
//
// The files, one concept each: server.go builds the handler; catalog.go
// mirrors the runtime's tools into the SDK's server and lists each
// principal's own; meta.go reads Carmy's keys of _meta into a request
// by the rules of POST /v1/tools/call (engine.RequestOf); call.go runs a
// tools/call through the runtime, which decides it (the allow-list, the
// tool) as it decides an HTTP call; result.go turns records and refusals
// into results; inflight.go cancels the call a notifications/cancelled
// names, and detached.go decides what becomes of a call whose client
// went away before its answer;
// auth.go checks bearer tokens and serves the RFC 9728 metadata document;
// refusals.go keeps the transport's own refusals in JSON-RPC's shape;
// package fastpath (internal/fastpath, its contract in its doc.go)
// answers a plain tools/call without the SDK's per-request session,
// exactly as the SDK would, through the same middleware (server.go hands
// it the middleware, the tool handler and the server's name; screen.go
// offers it every single message before the SDK); body.go reads a
// request's body once for both;
// passthrough.go answers the resources and prompts of upstream MCP servers,
// and listen.go sends their list changes to the clients that listen.
//
// Dependencies point one way: this package imports engine and store, and
// package api imports it (and supplies what only it knows: the tokens, the
// rate limits, the metrics and the call log, through Config's functions).
// Tools the runtime gains later (an upstream MCP server's, docs/mcp.md#carmy-in-front-of-mcp-servers-the-gateway) are
// picked up without a restart: the catalog follows
// engine.Runtime.ToolsGeneration.
package mcp
