// Package mcpgateway puts upstream MCP servers behind Carmy (docs/mcp.md#carmy-in-front-of-mcp-servers-the-gateway):
// their tools become ordinary tools of an engine.Runtime, named
// <name>.<upstream tool>, so every call of them takes Carmy's reservation
// path and runs at most once per identity, cluster-wide.
//
// An Upstream is one MCP server, reached over Streamable HTTP (URL) or
// stdio (Command: one child process per node, stopped by Close). Start
// connects in the background and lists the server's tools, registering
// them as the runtime's tool group <name> (engine.Runtime.SetToolGroup),
// with their input schema, description and annotations, optionally
// narrowed by an allow-list. The list is read again on
// notifications/tools/list_changed and every RefreshInterval. While the
// server cannot be listed (not yet connected, the connection lost, a
// listing failed), the group is unavailable: every call of <name>.*
// answers UNAVAILABLE (503 with Retry-After) before anything is reserved,
// and the upstream keeps reconnecting with a growing pause.
//
// A call's tools/call carries, in _meta, carmy/execution_id and, for a
// call with an identity, carmy/request_id, carmy/idempotency_key and
// carmy/fencing_token; over HTTP the request also carries the headers of
// an HTTP tool (Idempotency-Key, Carmy-Execution-Id, Carmy-Request-Id,
// Carmy-Fencing-Token) beside the configured ones. The caller's own
// credentials never reach the upstream: a tool sees only engine.Call.
//
// The upstream's answer becomes the recorded result: isError false is
// completed, with structuredContent as data when present, else
// {"content": [...]}; isError true is failed with UPSTREAM_TOOL_ERROR and
// the text content as its message (a JSON-RPC error answer too, with its
// message); the tool's timeout is timed_out. No answer is decided by
// whether any byte of the request left the node (docs/guarantees.md): none (not
// connected, the connection refused, no such host, the TLS handshake
// failed) is an engine.NotSentError, so the reservation is released and
// nothing recorded; some (the server hung up, the child died or was
// replaced) is an engine.AnswerLostError, so the execution is
// interrupted. A call an HTTP server refused unread, with 404, because it
// no longer knows the session (it restarted) is not sent either: it is
// sent once more on the new session, or released (session.go). Messages never hold the URL or a configured header value:
// the detail goes to the log, redacted.
//
// HTTP upstreams follow the rules of HTTP tools: the egress policy of
// package internal/egress applies to every connection, and no redirect is
// followed (the request fails instead).
//
// An upstream is a stranger (docs/mcp.md#carmy-in-front-of-mcp-servers-the-gateway). A stdio child gets PATH and
// Config.Env only, runs in Config.Dir in a process group of its own, and
// inherits no file descriptor but its standard three. Every message read
// from an upstream is bounded by Config.MaxAnswerBytes as it is read (an
// HTTP body, one SSE event, one stdio line, each held until complete): a
// call whose answer is larger is RESULT_TOO_LARGE, and a stdio child that
// sent it is replaced. A tool whose input schema references another
// document is left out (engine compiles schemas with no loader). A call
// that ends by its context is cancelled upstream (the SDK sends
// notifications/cancelled), and a stdio child must then answer a ping
// within Config.CancelGrace or be replaced. Results are redacted of the
// configured secrets (header and env values, the URL's query and
// userinfo) before they are recorded.
//
// An upstream's resources, resource templates and prompts pass through,
// read-only and unrecorded (passthrough.go): a Directory of the upstreams
// lists them under the upstream's prefix (prompts <name>.<prompt>, URIs
// carmy:<name>/<uri>) and forwards resources/read and prompts/get, for
// the /mcp endpoint, which it also tells when a list may have changed.
package mcpgateway
