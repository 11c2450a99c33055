// Package bench is Carmy's load generator, `carmy bench`: it drives
// running nodes with tool calls over HTTP (or MCP's tools/call) and
// reports the throughput, the latency, the outcomes, the longest stall and,
// from GET /metrics, the Raft log writes per call.
//
// Run is the whole command (cmd/carmy only dispatches to it). flags.go
// holds the flags and their checks; workload.go and conn.go make the
// calls, each client on kept-alive connections of its own; mcp.go the
// MCP form of a call; stats.go the latencies; stall.go the longest
// stretch without an answer; metrics.go the scrape of GET /metrics;
// report.go the table, the JSON result and the comparison of several
// results (--table).
package bench
