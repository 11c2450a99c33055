package mcpversion

import "slices"

// The protocol versions Carmy serves (those of the official Go SDK it is
// built on), oldest first.
const (
	V20241105 = "2024-11-05"
	V20250326 = "2025-03-26"
	V20250618 = "2025-06-18"
	V20251125 = "2025-11-25"
	V20260728 = "2026-07-28"

	// Latest is the newest version of the table: the one a client that
	// names none is offered, and the default of `carmy bench
	// --mcp-version`.
	Latest = V20260728

	// Unstated is the version the Streamable HTTP transport reads a
	// request that names none as (no Mcp-Protocol-Version header): the
	// SDK's rule, which [For] and [Lookup] follow for "".
	Unstated = V20250326
)

// Features are what Carmy switches on at one protocol version.
type Features struct {
	// Version is the version the features are those of.
	Version string
	// Batches: a POST may carry a JSON-RPC batch (a JSON array of
	// messages), answered entry by entry. 2025-06-18 removed batches.
	Batches bool
	// FastPath: Carmy's own answer to a plain tools/call (package
	// api/mcp/internal/fastpath), which decodes the call once instead of
	// through the SDK.
	FastPath bool
	// TasksCore: tasks in the core protocol: a tools/call with
	// params.task is a task, initialize declares the tasks capability and
	// tools/list marks every tool execution.taskSupport "optional".
	TasksCore bool
	// TasksExtension: tasks as the extension io.modelcontextprotocol/tasks:
	// a client that declares it in its capabilities is answered with a
	// task, tasks/get inlines the result, tasks/update exists and
	// tasks/list does not.
	TasksExtension bool
	// Stateless: no initialize handshake and no transport session
	// (Mcp-Session-Id); every request names its version, client and
	// capabilities in _meta and its method and tool in the Mcp-Method and
	// Mcp-Name headers; subscriptions/listen replaces the standalone GET
	// stream.
	Stateless bool
	// ClosedStreamCancels: a client that closes the response stream of a
	// tools/call before the answer cancels the call.
	ClosedStreamCancels bool
}

// table is the versions and their features, oldest first.
var table = []Features{
	{Version: V20241105, Batches: true},
	{Version: V20250326, Batches: true},
	{Version: V20250618, FastPath: true},
	{Version: V20251125, FastPath: true, TasksCore: true},
	{Version: V20260728, FastPath: true, TasksExtension: true, Stateless: true, ClosedStreamCancels: true},
}

// Table returns the versions and their features, oldest first (a copy).
func Table() []Features { return slices.Clone(table) }

// Supported returns the versions Carmy serves, newest first (a copy).
func Supported() []string {
	out := make([]string, 0, len(table))
	for i := len(table) - 1; i >= 0; i-- {
		out = append(out, table[i].Version)
	}
	return out
}

// Versions returns the versions whose features have, newest first.
func Versions(has func(Features) bool) []string {
	var out []string
	for i := len(table) - 1; i >= 0; i-- {
		if has(table[i]) {
			out = append(out, table[i].Version)
		}
	}
	return out
}

// First returns the oldest version whose features have, or "".
func First(has func(Features) bool) string {
	for _, f := range table {
		if has(f) {
			return f.Version
		}
	}
	return ""
}

// Lookup returns the features of v when v is a version of the table
// ("" reads as [Unstated]), and reports whether it is.
func Lookup(v string) (Features, bool) {
	if v == "" {
		v = Unstated
	}
	for _, f := range table {
		if f.Version == v {
			return f, true
		}
	}
	return Features{}, false
}

// For returns the features of v: those of the newest version of the table
// not after v in string order (which, for YYYY-MM-DD, is date order), so
// that a newer version than the table knows reads as the newest one.
// "" reads as [Unstated]; a v before every version of the table has no
// features (the zero Features, whose Version is "").
func For(v string) Features {
	if v == "" {
		v = Unstated
	}
	for i := len(table) - 1; i >= 0; i-- {
		if table[i].Version <= v {
			return table[i]
		}
	}
	return Features{}
}
