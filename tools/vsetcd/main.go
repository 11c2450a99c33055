// Command vsetcd is the load generator of scripts/vs-etcd: one program that
// drives a 3-member etcd and a 3-node Carmy cluster the same way, so that
// their numbers can be set side by side.
//
//	vsetcd run --system etcd|carmy --targets a,b,c --mode new|replay --clients N …
//	vsetcd table results.jsonl
//
// run prints one JSON object (a result) on stdout. Every caller makes one
// call at a time, each to the next target in turn (caller i starts at
// target i), for --warmup (not counted) and then --duration. A call is what
// an idempotency layer does for an agent's tool call:
//
//   - etcd, mode new: a transaction that puts the identity key if it is
//     absent (If(CreateRevision(key) == 0) Then(Put(key, reservation))
//     Else(Get(key))), then a Put of the result: two linearizable,
//     durably committed writes, both on the call's member.
//   - etcd, mode replay: a linearizable Get of a key seeded before.
//   - carmy, mode new: POST /v1/tools/call of the echo tool with a fresh
//     request_id (reserve and complete: two commits).
//   - carmy, mode replay: the same call again for a request_id seeded
//     before (answered from the applied state).
//
// table reads the results of a scripts/vs-etcd run and prints them pair by
// pair (etcd's run, then Carmy's) with Carmy's calls/s over etcd's, and
// the median ratio of each mode and caller count.
//
// It lives in a module of its own so that the etcd client and gRPC never
// enter Carmy's go.mod.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = runCommand(ctx, os.Args[2:], os.Stdout, os.Stderr)
	case "table":
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, usage)
			os.Exit(2)
		}
		err = tableCommand(os.Args[2], os.Stdout)
	case "-h", "--help", "help":
		fmt.Println(usage)
		return
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "vsetcd: %v\n", err)
		os.Exit(1)
	}
}

const usage = `usage:
  vsetcd run --system etcd|carmy --targets host:port,… --mode new|replay
             [--clients 64] [--duration 10s] [--warmup 1s] [--args-size 64]
             [--replay-pool 1000] [--pair N]
  vsetcd table results.jsonl`
