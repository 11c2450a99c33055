// Package api serves Carmy's HTTP API (SPEC §2) with Echo.
//
// The server decodes strictly (unknown fields, wrong types and oversized
// bodies are refused), authenticates bearer tokens into a Caller, checks
// the caller's tool allow-list, and hands the call to a Runtime. Every
// error, Echo's own 404, 405 and 413 included, leaves through one
// HTTPErrorHandler that writes SPEC §2.2's envelope:
//
//	{"error":{"code":"…","message":"…", …}}
//
// The package declares what it needs of the runtime (Runtime) and of a
// cluster (Cluster) as interfaces, and the small types those interfaces
// speak; package carmy implements Runtime and re-exports the types.
package api
