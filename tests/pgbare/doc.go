// Command pgbare measures the ceiling of a PostgreSQL fleet's new calls:
// a bare program that does, per call, the two durable writes a fleet
// does at the least (insert the identity's row if absent; then update it
// with the result), and nothing else (no counters, no leases, no audit
// ledger, no HTTP), from several pools as several nodes would, each pool
// writing in rounds as a node does (one transaction for the writes queued
// meanwhile: BEGIN and one statement for the round's inserts and one for
// its updates in one pipeline, then COMMIT).
//
// It writes to the tables of the store itself (store/postgres opens them
// in a schema of their own, -schema, so the table, its indexes and the
// seq sequence are the fleet's), and prints calls a second. scripts/pgfleet
// ceiling runs it beside three `carmy serve` nodes on the same database,
// interleaved with `carmy bench --mode new`, and prints the ratio.
//
//	go run ./tests/pgbare -dsn 'postgres://…' -pools 3 -clients 64 -duration 10s
//
// It is a measuring tool, not part of carmy: it stops by itself after
// -warmup plus -duration, and on SIGINT or SIGTERM.
package main
