// Command carmy runs Carmy: the idempotent tool runtime for AI agents.
//
//	carmy serve --dev          # try it out: demo tools, auth off, one node
//	carmy serve --config carmy.yaml --http-addr n1.internal:8080 --raft-addr n1.internal:8300 --gossip-addr n1.internal:8301
//	carmy help serve           # every flag and its CARMY_* variable
//	carmy cluster status --addr 127.0.0.1:8081   # leader, members, log progress
//
// main only calls run(ctx, args, stdout, stderr), so tests drive the same
// path the binary takes.
package main
