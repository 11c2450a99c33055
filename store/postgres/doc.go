// Package postgres is a store.Store kept in PostgreSQL, for library users
// who run PostgreSQL and want their reservations durable and shared by
// several processes without running a Raft cluster. It is its own package,
// so only programs that import it link the driver (pgx v5 and pgxpool).
//
//	s, err := postgres.Open(ctx, os.Getenv("CARMY_POSTGRES_DSN"), postgres.Config{})
//	if err != nil { ... }
//	defer s.Close()
//	app := carmy.App()
//	app.IdempotencyStore(s)
//
// It passes store/storetest, the conformance suite of every store, and
// keeps the in-memory store's semantics: Reserve answers a held identity
// (replay, conflict, uncertain) whatever the bounds, reserves a vacant one
// or fails closed (store.ErrCapacity, *store.QuotaError), and never evicts;
// Complete, Cancel, Resolve and Release apply only from the statuses they
// name, and otherwise return a *store.StateError carrying the record as it
// stands. Finished records are removed only by Expire (store.Expirer), which
// nothing calls unless the program chooses a retention. The store does not
// implement store.Peeker: it cannot answer without a round trip.
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
//   - meta: one row, the number of records (entries) and the last seq.
//   - principals: the number of records of each principal.
//
// # Isolation and locking
//
// Every transaction is READ COMMITTED; correctness rests on row locks, not
// on snapshots, so no transaction is ever retried for a serialization
// failure.
//
// Reserve first reads the identity's record without a lock: a held
// identity is answered from it. For a vacant one it runs one statement in
// a transaction: it increments entries and last_seq of the meta row when
// entries is below Capacity (taking that row's lock), inserts the record
// with that seq using INSERT … ON CONFLICT DO NOTHING, and increments the
// principal's row when it is below the execution's Quota (or Quota is 0).
// If a part finds its bound reached, or the identity held, the transaction
// rolls back; otherwise it commits.
//
//   - Exactly one of concurrent reservers of an identity inserts: the
//     primary key decides, and a second inserter waits for the first's
//     commit and then does nothing. It then reads the winner's record.
//   - Capacity and quotas are exact: the count of records is a column that
//     only changes under the meta row's lock, which every reservation,
//     Release and Expire takes first and holds to its commit; the next
//     reserver reads the committed count (READ COMMITTED re-reads a row
//     updated by a transaction it waited for). The per-principal counters
//     change only while that lock is held too, so they cannot deadlock.
//   - Seq is taken under the same lock, so it grows in commit order: a
//     List page continued with Before never skips a record committed after
//     the page was read with a lower Seq. (A bigserial would not promise
//     that.)
//
// The price is that reservations of new identities commit one at a time:
// their throughput is bounded by the server's commit latency (a WAL
// flush). Replays, conflicts and uncertain answers take no lock, and
// Complete, Cancel, Resolve and MarkInterrupted are single UPDATEs that
// lock one record. The benchmarks in this package measure it.
//
// # Failures
//
// Store.Store's contract holds: a write that returns store.ErrUnavailable
// was not applied; a write that returns store.ErrCommitUnknown may have
// been applied, and the caller must find out (Lookup, Get, or a retry of
// the same Complete, which returns a *store.StateError naming this
// execution once its result is recorded). The store decides by where the
// failure happened:
//
//   - before the commit was sent (no connection, BEGIN, a statement of a
//     transaction that then rolls back): store.ErrUnavailable;
//   - at the commit (COMMIT, or the single UPDATE of Complete, Cancel,
//     Resolve, MarkInterrupted): store.ErrUnavailable only when the server
//     surely did not commit (nothing was sent, or it answered with an
//     ERROR); a lost connection, an ended context or a FATAL from a server
//     shutting down is store.ErrCommitUnknown.
//
// Reads that fail return store.ErrUnavailable. Every error wraps its cause
// with %w. Every method honours its context; a context that ends while a
// commit is in flight makes its outcome unknown, so callers bound writes
// with a context of their own rather than a caller's.
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
