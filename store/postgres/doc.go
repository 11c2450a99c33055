// Package postgres is a store.Store kept in PostgreSQL, for library users
// who run PostgreSQL and want their reservations durable and shared by
// several processes without running a Raft cluster. It is its own package,
// so a program built on package engine alone links no driver (pgx v5 and
// pgxpool); package embed links it for embed.StartNode's fleet nodes.
//
//	s, err := postgres.Open(ctx, os.Getenv("CARMY_POSTGRES_DSN"), postgres.Config{})
//	if err != nil { ... }
//	defer s.Close()
//	app := carmy.App()
//	app.IdempotencyStore(s)
//
// It passes store/storetest, the conformance suite of every store, and
// keeps the in-memory store's semantics: Reserve answers a held identity
// (replay, conflict, uncertain, awaiting) whatever the bounds, reserves a vacant one
// or fails closed (store.ErrCapacity, *store.QuotaError, *store.CapacityError
// for bytes), and never evicts;
// Complete, Cancel, Resolve, Release and Decide apply only from the
// statuses they name, and otherwise return a *store.StateError carrying
// the record as it stands. Approval gates are kept (approval.go): a gated
// reservation awaits a decision, which any process may take. Finished records are removed only by Expire (store.Expirer), which
// nothing calls unless the program chooses a retention. A Store is an
// engine.Backend that peeks nothing (it cannot answer without a round
// trip), knows no other process's runner and delivers no cancels; a Fleet
// knows and delivers both (backend.go).
//
// # Tables
//
// Open creates the tables, or migrates them, in one transaction under a
// transaction-level advisory lock keyed by the schema, so that several
// processes may open the store at once; schema_version records the
// applied versions, and a database at a newer version than this build's
// SchemaVersion is refused. The tables, in Config.Schema with
// Config.TablePrefix ("carmy_"):
//
//   - records: one row per identity (primary key principal, session_id,
//     request_id), execution_id unique, seq unique. data and error are
//     bytea: a result is replayed byte for byte as it was recorded (jsonb
//     would re-encode it). Times are timestamptz, kept to the microsecond.
//     Its indexes serve the listings (Store.List): one session of a
//     principal, one session of every principal, every session of a
//     principal (principal, seq), the open records (seq, partial:
//     running and interrupted), the records awaiting approval (seq,
//     partial, schema version 8), and seq alone, newest first. Since
//     version 8 a gated record keeps its gate and its decision in columns
//     of its row (approval.go).
//   - meta: one row, the number of records (entries) and their bytes
//     (store.RecordSize summed, kept by every write that changes a record's
//     size), each plus the leases outstanding, and the bounds those were
//     granted under; its row lock serialises every grant of a lease and
//     every write decided against the counts.
//   - principals: the same counts for each principal.
//   - leases (schema version 6): each Store's leases of entries and bytes,
//     store-wide and per principal (leases.go), which its rounds use up
//     without the meta row.
//   - seq: the sequence of seq (schema version 6).
//   - audit and audit_head (schema version 7): the audit ledger's entries
//     and its head row (ledger.go); audit_queue (schema version 9): the
//     drafts of entries not yet chained. Every transaction that decides
//     queues its drafts before it commits (one row, no lock shared with
//     other transactions); the chainer (ledger_chain.go) moves the
//     committed rows onto the chain under the head row's lock, before
//     every read of the ledger and in the background on every Store that
//     committed since its last pass: the ledger's chain is one line
//     across every process.
//
// # Isolation and locking
//
// Every transaction is READ COMMITTED, set explicitly whatever the
// server's default: correctness rests on one row lock, and on statements
// that run after it is granted seeing what committed meanwhile, which only
// READ COMMITTED's per-statement snapshots give. No transaction fails for
// a serialization conflict, and none is retried. (Under SERIALIZABLE,
// concurrent reservers would fail and retry instead of wait.)
//
// Reserve joins a round: one transaction that locks its Store's lease rows
// (or, when they do not hold the round, the meta row: see Leases below)
// when one of its identities is vacant, then runs its
// reservations (one statement for all of them, which answers the held
// identities from their records and reserves the vacant ones, else one per
// reservation: see below), and commits. A round whose identities are all
// held locks nothing and writes nothing. While most recent reservations
// found their identity held (retries, replays), Reserve reads the identity
// first, without a lock, and only a vacant one joins a round
// (reserve_path.go): a node runs one round at a time, reads side by side.
// Against the counts (under the meta row, every lease folded in), no
// other transaction can insert or delete a record or change a counter
// (every one that does takes the row or a lease first), so each
// statement's snapshot is the current state: it checks that the identity is vacant,
// the execution id unused, entries below Capacity, the principal's count
// below the execution's Quota, and the record and the execution's Headroom
// within Config.MaxBytes and the execution's ByteQuota, and then inserts the record with the
// next seq and increments the counters (against a lease: that the lease
// holds them, and then uses it up), or writes nothing and says which
// check failed, or returns the identity's record when it is held.
//
//   - Exactly one of concurrent reservers of an identity reserves, in one
//     process or across many: the identity is the primary key and the
//     insert says ON CONFLICT DO NOTHING; a round whose insert found the
//     identity taken by another Store's round rolls back and runs again,
//     and answers from the committed record.
//   - Capacity and quotas are exact: a lease was counted when granted
//     (the counts never exceed a bound the leases were granted under), a
//     round admits only what its leases hold, and at a bound every lease is
//     folded back and the counts are read under the lock. A count(*) would
//     not do without it: a statement's snapshot is taken before it waits
//     for a lock, which is why the checks run in statements after the one
//     that takes the lock.
//   - Seq comes from a sequence: unique, and larger than the seq of every
//     reservation that committed before this one began (what a fencing
//     token needs: a re-run of an identity, after its record was released,
//     interrupted or expired, gets a larger one). Two reservations in
//     flight at once, on different nodes, may commit in the other order
//     than their seqs.
//
// # Leases
//
// Holding one row until the commit meant that the transactions of every
// process that write committed one at a time, each paying a WAL flush.
// Leases (leases.go) take that row out of the common path: each Store's
// rounds use up leases of entries and bytes granted to it alone, and take
// the meta row only to be granted more (about once per 512 new records
// far from the bounds) or, near a bound, to fold every Store's leases
// back and decide against the exact counts. Within a Store, transactions
// that write still pay a WAL flush each. To pay it once for many, a Store
// gathers the reservations and completions that arrive while a round is in
// flight into the next round (rounds.go): one transaction, one statement
// over arrays for all its reservations and one for all its completions,
// each all or nothing (rounds_set.go), and one statement per member only
// when that does not apply (a bound reached, an execution id in use, a
// record past its dedupe window). Replays, conflicts and uncertain answers
// take no lock; MarkInterrupted is a
// single UPDATE. Complete adds the outcome's bytes to the counts, so its
// statement decides under the lock whether the outcome fits
// (store.Overflow: a result that does not is recorded as
// store.OverflowResult). Cancel and Resolve are each a transaction that
// takes the meta row first (as rounds do, so no two writers wait for each
// other in opposite orders), reads the counts, decides whether the outcome
// fits (a resolution that does not is refused), updates the record and
// the counts, and commits: they take the meta row and fold every lease
// first (as Release and Expire do), so they wait for the rounds that hold
// leases, and the Stores' next rounds are granted leases again.
//
// # Failures
//
// store.Store's contract holds: a write that returns store.ErrUnavailable
// was not applied; a write that returns store.ErrCommitUnknown may have
// been applied, and the caller must find out (Lookup, Get, or a retry of
// the same Complete, which returns a *store.StateError naming this
// execution once its result is recorded). The store decides by where the
// failure happened:
//
//   - before the commit was sent (no connection, BEGIN, a statement of a
//     transaction that then rolls back): store.ErrUnavailable;
//   - at the commit (COMMIT, or the single UPDATE of MarkInterrupted):
//     store.ErrUnavailable only when the server
//     surely did not commit (nothing was sent, or it answered with an
//     ERROR); a lost connection, an ended context or a FATAL from a server
//     shutting down is store.ErrCommitUnknown.
//
// A Reserve or Complete whose context ends while it waits for a round
// returns store.ErrUnavailable (it was never sent); one whose context ends
// while its round is in flight returns store.ErrCommitUnknown (the round
// goes on and may commit it). When a round's COMMIT fails, its members
// refused by a bound, and its completions that found the record settled,
// get store.ErrUnavailable rather than that answer: an earlier member that
// did not commit may have caused it.
//
// Reads that fail return store.ErrUnavailable. Every error wraps its cause
// with %w. Every method honours its context; a context that ends while a
// commit is in flight makes its outcome unknown, so callers bound writes
// with a context of their own rather than a caller's.
//
// # Fleets
//
// A Fleet (fleet.go) is one node of a fleet: processes that share the
// database and nothing else, as carmy serve --store postgres://… runs
// them. It is a store.Store over a Store it opens in the background, and
// adds what a cluster would give the runtime: heartbeat rows (the nodes
// table, schema version 5) with a lease, a sweep by every live node that
// marks the running executions of dead nodes interrupted, cancellations
// delivered by NOTIFY in Cancel's transaction to a LISTEN connection on
// every node, a session advisory lock naming the one node that probes,
// retention, and the audit ledger's upkeep (fleet_ledger.go: pruning and
// signed checkpoints, which any node may run; the chaining of the queued
// drafts is its Store's, ledger_chain.go).
//
// # Deployment
//
// Processes sharing the tables must each use their own node id
// (carmy.WithNodeID): a process that starts marks every running execution
// of its node id interrupted. The store is a plain PostgreSQL client: the
// DSN chooses TLS, the pool size (pool_max_conns) and the rest; with a
// transaction-mode connection pooler (PgBouncer), set
// default_query_exec_mode=exec or simple_protocol in the DSN, since the
// statements are otherwise prepared per connection.
package postgres
