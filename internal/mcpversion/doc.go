// Package mcpversion is Carmy's one table of the MCP protocol versions it
// serves and of what each version switches on in Carmy (docs/mcp.md,
// "Protocol versions", states the same table; package docs checks that
// they agree).
//
// Every place that names, lists or compares a protocol version asks this
// package: [For] (the features of a version, newer unknown versions
// reading as the newest one not after them), [Lookup] (a version of the
// table exactly), [Versions] and [Supported] (the list), [Latest], and
// the constants of each version.
package mcpversion
