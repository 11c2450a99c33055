// Package guarantees is the guarantee suite: one table-driven, black-box
// test of Carmy's promises (docs/guarantees.md) over every way a call
// reaches a node — the HTTP API, /mcp at each protocol version with two
// independent client implementations, MCP tasks, and the gateway in front
// of stdio and Streamable HTTP upstreams — on every back end (one node, a
// three-node Raft cluster called on a follower, a PostgreSQL fleet), under
// the faults that cross those seams (an upstream down, restarted or hanging
// up mid-answer, a client aborting mid-call, the runner node killed).
//
// Each cell is a subtest named backend/route/scenario; a cell that cannot
// apply is listed, with its reason, in notApplicable and in
// docs/testing.md, and reported by the test rather than skipped silently.
// The package holds only tests and the upstream they call
// (./upstream); see docs/testing.md for the switches. It is a test
// harness, not a supported API.
package guarantees
