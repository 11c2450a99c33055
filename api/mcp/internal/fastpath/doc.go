// Package fastpath answers the one MCP request that matters for
// throughput, a single plain tools/call, without the SDK's per-request
// machinery, in exactly the bytes the SDK
// (github.com/modelcontextprotocol/go-sdk) would answer it with. Package
// api/mcp serves /mcp and asks it first (Server.Serve); whatever it does
// not take goes, unchanged, to the SDK. Only api/mcp imports it, and it
// imports nothing of api/mcp: what it needs of the endpoint comes
// through Config.
//
// Why: the SDK's stateless Streamable HTTP handler serves each request
// with a server session of its own (a jsonrpc2 connection, its
// goroutines and channels) and decodes the body five times over (as a
// batch, as a message twice, its _meta twice, its params), each time
// through a decoder that allocates a fresh 32 KiB buffer: about 330 KB
// and 270 allocations a tools/call, several times the cost of
// POST /v1/tools/call (BenchmarkMCPCall and BenchmarkHTTPCall in package
// api). At 2026-07-28 it decodes more: the _meta again for the protocol
// version, the client's capabilities and name (each re-encoded, then
// decoded), and the params twice for the Mcp-Name header.
//
// # The contract
//
// It takes only a request the SDK would serve exactly so, and answers it
// as the SDK does:
//
//   - it takes only a request that passes every check the SDK's handler
//     makes before it reaches the method (the Host of a loopback node
//     without auth, the Mcp-Protocol-Version header, the method,
//     Content-Type, Accept, Last-Event-ID, the body's size, which the
//     caller checked), with the SDK's own rules (eligible.go), at the
//     versions internal/mcpversion marks FastPath: 2025-06-18 and
//     2025-11-25, for which the SDK checks no Mcp-Method or Mcp-Name
//     header and reads no _meta of its own, and 2026-07-28, with the
//     checks of meta.go besides;
//   - it takes only a body in a plain subset of JSON, on which any JSON
//     decoder agrees (parse.go): one object, valid UTF-8, no escaped
//     surrogate, no number with an exponent or over 15 characters,
//     nesting at most 64 deep, no duplicate member, no member beyond
//     jsonrpc, id, method and params (and name, arguments and _meta in
//     params), jsonrpc "2.0", method "tools/call", an id that is a
//     string or an integer, a string name, params and _meta objects, and
//     no _meta key of the protocol's own (io.modelcontextprotocol/…) but,
//     at 2026-07-28, the four a client sends with every request
//     (meta.go);
//   - it runs the call through the same middleware as the SDK does
//     (Config.Middleware, over Config.Tool), with the request the SDK
//     would have built (but for the protocol's _meta keys, which it
//     leaves out: Carmy never reads them);
//   - it writes the answer in the bytes and with the headers the SDK
//     writes (Content-Type application/json, Cache-Control): a result of
//     the shape Carmy's tools give in one pass (encode.go), anything
//     else with the SDK's own encoders; at 2026-07-28 it adds to a
//     result what the SDK adds (meta.go).
//
// Every other request is left to the SDK: a batch, another method, a
// notification, a body outside the plain subset, another protocol
// version, a tool whose schema may bind a header (Config.HeaderBound),
// a request the SDK would refuse.
//
// The tests that hold it to this contract drive the whole endpoint, the
// fast path against the SDK alone, so they live in package api/mcp:
// TestFastPathMatchesSDK, TestFastPathMatchesSDKNewProtocol and
// FuzzFastPathMatchesSDK send requests through both and compare the
// answers byte for byte. This package's own tests, TestAppendAnswerMatchesSDK
// and FuzzAppendAnswer, compare its encoder with the SDK's.
package fastpath
