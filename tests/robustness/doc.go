// Package robustness is Carmy's fault-injection harness, in the manner of
// Jepsen and etcd's robustness tests: a real cluster, concurrent clients, a
// nemesis, and checkers that must find nothing.
//
// Each run starts a fresh cluster of 3 or 5 nodes, each a container with
// its own address on a private Docker network (the test image built by
// `scripts/image --test`: carmy with the test fault layer compiled in, and
// the ledger server), with snapshots every 64 entries or 3 s so that
// lagging, restarted and re-added nodes install them. The harness and its
// clients run on the host and reach every container through ports
// published on 127.0.0.1.
//
// Workload: 6 (3 nodes) or 8 (5 nodes) agents call the tool ledger_write
// on random nodes. Each call has a request_id; 20 % of new identities are
// sent twice at once to two nodes; 15 % of calls revisit an earlier
// identity, 40 % of those with different arguments (a conflict); 3 % ask
// the tool to outlive its 2 s timeout; 2 % of new identities ask the ledger
// to cut their first request unrecorded (a lost answer whose effect never
// happened: interrupted, released by the tool's reconcile probe, then run
// by a retry). A third of the calls, chosen anew
// for every attempt, go through the MCP endpoint (a stateless tools/call
// at /mcp with the identity in _meta, at protocol version 2025-11-25 or
// 2026-07-28) instead of POST /v1/tools/call (sent through api/client, one
// attempt each, as are the harness's reads of the records and its cluster
// administration), so that an identity's calls
// and retries mix the transports; both are classified into the same
// outcomes, and an MCP answer's result (status, data or error) must equal
// the HTTP answers' (which alone carry the record's timestamps, compared
// among HTTP answers). An agent retries an identity after
// no answer, UNAVAILABLE or EXECUTION_UNCERTAIN, with backoff, as an agent
// would. The tool's upstream is the ledger container: every execution of
// the tool body is recorded there, outside the cluster, before the tool
// answers.
//
// Approval gates (approver.go, checks_gated.go): the nodes run with auth
// on (the test image's config, deploy/docker/test/carmy.yaml, reads the
// tokens of the principals agent and approver and of the admin from the
// environment; each run makes fresh ones). The agents call as agent, the
// harness reads their records as agent and administers the cluster (GET
// /v1/cluster, membership) as the admin. 10 % of new identities call
// ledger_write_gated, the ledger tool behind a gate (approvers
// [approver], expiring after 15 s); the agent polls such an identity
// while it is answered awaiting_approval (202, or APPROVAL_PENDING over
// MCP), without using up its attempts. The approver, a client of its
// own, reads the approval queue (GET /v1/executions?approvals=true) on a
// random node every 300 ms; up to 2 s after it learns of an execution it
// approves it (82 %), denies it (10 %) or leaves it to expire (8 %), on a
// random node, through the faults, sending a decision again after no
// answer or 503 until it is answered (409 INVALID_STATE: decided
// already; an approval may also be answered EXECUTION_UNCERTAIN, its
// run's answer lost). Once the faults healed it decides what is left.
//
// Nemesis: one fault at a time, every kind once in a random order per
// seed, then again: kill (SIGKILL) and restart the leader, a follower, or
// every node at once; pause and resume the leader or a follower (cgroup
// freezer); isolate the leader or a follower with `docker network
// disconnect`; through the test fault layer (internal/faultnet, steered by
// PUT /internal/v1/faults), which cuts Raft, gossip and node-to-node HTTP
// alike: a one-way drop (the leader cannot reach a follower), a split with
// the leader on the minority side (1|2 or 2|3), and a bridge (two halves
// joined by one node); remove a voter through the admin API and add it
// back, once with its data kept and once wiped (a new container and
// volume under the same name); and load alone (docs/operations.md#overload, overload.go):
// three processes spinning on the host's CPUs for the hold, and a burst
// of 40 concurrent calls with 900 KiB results on a follower, none of
// which may be answered "the tool ran but its outcome is not recorded"
// (an anomaly); the report tells whether the leader held through each.
// After each fault heals, the cluster must be
// whole again (every node ready, one leader, every voter alive) within
// 90 s.
//
// Checks, once the last fault healed:
//   - linearizability: every identity's history of answers is checked
//     against the model of model.go with porcupine; unanswered calls and
//     UNAVAILABLE answers may or may not have reserved (UNAVAILABLE ones
//     never run the tool). Failures are drawn as HTML visualisations;
//   - at most once: no identity has two ledger entries, gated or not;
//   - gates (the model has none: gated identities are left out of its
//     history): a gated identity denied or expired has no ledger entry;
//     one completed has exactly one, of the execution its record names;
//     a decision answered with the record left it so (a final status is
//     the identity's final record; an approval's running or interrupted
//     execution is never denied or expired after); every decision sent
//     was answered; an approval answered completed is held against the
//     ledger as a completed answer is;
//   - every completed answer has exactly one ledger entry, of the same
//     execution, with the same data; every 200 answer of an identity names
//     the same execution and carries the same result (timestamps included);
//   - every execution on the ledger is the one its identity's record names;
//   - no record is still running, interrupted or awaiting approval 60 s
//     after the faults healed: the tool has a reconcile probe (GET
//     /by-key/{key} on the ledger), so the leader settles every
//     interrupted execution, and a gate left undecided expires after 15 s;
//   - every probe resolution agrees with the ledger (probes.go): resolved
//     completed means exactly one entry, of that execution, with its data;
//     released (a 404) means that execution never appears on the ledger;
//   - every node reaches the same applied index and state-machine hash
//     (GET /internal/v1/state).
//
// A report per run gives the operations by outcome (awaiting: a gated
// call's 202), the faults by kind, the uncertain answers, the reconcile
// probes and what they resolved, the gates (calls and identities, the
// executions the approver learned of and what became of its decisions,
// the gated identities by final status and how many ran), the seconds in
// which no call got a settled answer (an awaiting answer is settled), and
// the anomalies, which must be none.
//
// A fleet on PostgreSQL (docs/operations.md#a-fleet-on-postgresql; TestRobustnessPostgres, fleet.go,
// nemesis_fleet.go): the same workload, ledger and checks against one
// database container (the image `scripts/image --postgres` builds:
// Debian's PostgreSQL, its data in the container's own layer, which
// outlives a kill) and 3 nodes of the test image started with
// `--store postgres://carmy@db:5432/carmy?sslmode=disable`, the password
// from a file (--store-password-file), and --store-lease 3s (as the Raft
// nodes run with --fast-failover): no Raft, no gossip, no leader. The
// nodes' API is plain HTTP, as the Raft nodes'; a fleet node has no
// node-to-node endpoints, so none of the Raft nodes' mutual TLS applies,
// and the database test image serves no TLS. The nemesis, one fault at a
// time as above, every kind once in a random order per seed, then again:
// stop the database (SIGINT, its fast shutdown) and start it again; kill it
// (SIGKILL: it recovers from its WAL when started again); pause it (cgroup
// freezer) and resume it; end the nodes' connections
// (pg_terminate_backend of every backend of the nodes' role, from the host
// through the database's published port with pgx) at once and every
// 500 ms while the fault lasts; kill a node and start it again; pause a
// node; cut a node off the network (from the database and the ledger) with
// `docker network disconnect`. A fault must bite, as a leader's loss must
// above: while the database is down or paused every node answers /readyz
// 503; a paused or cut-off node is listed dead by the others within 30 s,
// and then none of its executions may be listed running for more than
// 30 s (the others' liveness sweep marks them interrupted; the reconcile
// probe settles them) — the report says how many there were. Whole again, after each fault and at the end, means every
// node ready, every node listing every node's heartbeat alive and the
// database reachable in GET /v1/cluster, and the database answering the
// harness, within 90 s. The checks are the ones above but those with no
// meaning for a fleet: there is no leader to depose or keep, and no
// applied index or state-machine hash to converge (one database holds the
// records); the report leaves them out and says "(postgres)".
//
// Modes (CARMY_ROBUSTNESS): short, the default, which `go test ./...` and
// CI run: 3 nodes for 30 s and 5 nodes for 35 s, seed 1 each, about two
// minutes on a busy 2-core machine once the test image is built, and a
// fleet of 3 nodes for 30 s with seed 1, 80 to 105 s
// more (plus 30 to 60 s for the PostgreSQL test image's build); long: 3
// nodes for 120 s and 5 nodes for 150 s, and a fleet of 3 nodes for 120 s,
// seeds 1 to 10 each (scripts/robustness); off. CARMY_ROBUSTNESS_SEEDS
// sets the seeds (a count or a list), CARMY_ROBUSTNESS_OUT the directory of
// reports and visualisations (default $TMPDIR/carmy-robustness). Without a
// Docker engine the test is skipped with a loud message, except in CI
// (CI or CARMY_REQUIRE_DOCKER=1 set), where it fails.
//
// Everything a run creates carries the label carmy.test.run=<run id> and is
// removed by it when the run ends, failed or not (tests/dockertest).
package robustness
