// Package api serves Carmy's HTTP API (docs/api.md) with Echo.
//
// The server decodes strictly (unknown fields, wrong types and oversized
// bodies are refused), authenticates bearer tokens into an engine.Caller,
// and hands the call to a Runtime. Every error, Echo's own 404, 405 and
// 413 included, leaves through one HTTPErrorHandler that writes the
// envelope of docs/errors.md:
//
//	{"error":{"code":"…","message":"…", …}}
//
// Package api imports package engine, the tool runtime, and speaks its
// types (engine.Caller, engine.Request, …); it declares, as interfaces,
// only the methods it calls of the runtime (Runtime, which *engine.Runtime
// implements) and of a cluster (Cluster). The root package carmy
// assembles a runtime and this server; api does not import it.
package api
