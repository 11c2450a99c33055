// Package mcpclient is the one hand-written MCP client of Carmy's
// harnesses: `carmy bench` (internal/bench), the robustness workload
// (tests/robustness) and tests that post raw JSON-RPC to /mcp. It writes
// a request as a Streamable HTTP client of a protocol version does
// (internal/mcpversion): the transport's headers ([Headers]), and at a
// stateless version the protocol's own _meta members ([ProtocolMeta],
// [AppendProtocolMeta]) and the Mcp-Method and Mcp-Name headers; a
// [Client] posts requests and reads the answer, a JSON body or the last
// message of an event stream.
//
// It needs no initialize: Carmy's endpoint is stateless at every version
// (docs/mcp.md). Product code (internal/bench) uses it, so it lives under
// internal/ rather than in a test harness.
package mcpclient
