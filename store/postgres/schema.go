package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
)

// SchemaVersion is the version of the tables this package creates and
// uses. A database whose tables are at a later version (made by a newer
// build) is refused by Open rather than written with an older layout.
const SchemaVersion = 9

// migrations[v-1] takes the tables from version v-1 to v. Each runs in the
// migrating transaction, so a version is applied whole or not at all.
// Names in braces are replaced by the tables' quoted, schema-qualified
// names (see names.expand). A released migration is never edited: a change
// of layout is a new entry.
var migrations = []string{
	// 1: the records, the store-wide counter row and the per-principal
	// counters.
	//
	// data and error are bytea, not jsonb: they are replayed byte for byte
	// as the tool returned them, and jsonb would re-encode them.
	// seq is assigned under the lock of the counter row (see reserve.go),
	// so it grows in the order reservations commit.
	`CREATE TABLE {records} (
	principal    text        NOT NULL,
	session_id   text        NOT NULL,
	request_id   text        NOT NULL,
	execution_id text        NOT NULL,
	seq          bigint      NOT NULL,
	tool         text        NOT NULL,
	fingerprint  text        NOT NULL,
	status       text        NOT NULL,
	node_id      text        NOT NULL,
	started_at   timestamptz NOT NULL,
	finished_at  timestamptz,
	data         bytea,
	error        bytea,
	resolved     boolean     NOT NULL DEFAULT false,
	CONSTRAINT {rec_pkey} PRIMARY KEY (principal, session_id, request_id),
	CONSTRAINT {rec_exec} UNIQUE (execution_id),
	CONSTRAINT {rec_seq} UNIQUE (seq),
	CONSTRAINT {rec_status} CHECK (status IN ('running', 'interrupted', 'completed', 'failed', 'timed_out', 'cancelled'))
);
CREATE INDEX {rec_psession} ON {records} (principal, session_id, seq);
CREATE INDEX {rec_session} ON {records} (session_id, seq);
CREATE INDEX {rec_running} ON {records} (node_id) WHERE status = 'running';
CREATE INDEX {rec_finished} ON {records} (finished_at) WHERE finished_at IS NOT NULL;
CREATE TABLE {meta} (
	singleton boolean NOT NULL DEFAULT true,
	entries   bigint  NOT NULL,
	last_seq  bigint  NOT NULL,
	CONSTRAINT {meta_pkey} PRIMARY KEY (singleton),
	CONSTRAINT {meta_one} CHECK (singleton),
	CONSTRAINT {meta_entries} CHECK (entries >= 0)
);
INSERT INTO {meta} (entries, last_seq) VALUES (0, 0);
CREATE TABLE {principals} (
	principal text   NOT NULL,
	entries   bigint NOT NULL,
	CONSTRAINT {princ_pkey} PRIMARY KEY (principal),
	CONSTRAINT {princ_entries} CHECK (entries >= 0)
);`,
	// 2: byte accounting. The store's and each principal's bytes
	// (store.RecordSize summed over their records, see recordSizeSQL),
	// kept beside the counts by every write that changes a record's size,
	// under the meta row's lock; computed here from the records a version
	// 1 store holds.
	`ALTER TABLE {meta} ADD COLUMN bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE {principals} ADD COLUMN bytes bigint NOT NULL DEFAULT 0;
UPDATE {meta} SET bytes = (SELECT coalesce(sum(` + recordSizeV1SQL + `), 0) FROM {records}) WHERE singleton;
UPDATE {principals} AS pr SET bytes = (SELECT coalesce(sum(` + recordSizeV1SQL + `), 0) FROM {records} r WHERE r.principal = pr.principal);`,
	// 3: the indexes of the console's listings (see List): every session
	// of one principal, newest first, and the open records (running and
	// interrupted, a small part of the table), newest first, for the
	// listing of those that need attention. IF NOT EXISTS: a version 2
	// store rebuilt by hand may have them already.
	`CREATE INDEX IF NOT EXISTS {rec_pseq} ON {records} (principal, seq);
CREATE INDEX IF NOT EXISTS {rec_open} ON {records} (seq) WHERE status IN ('running', 'interrupted');`,
	// 4: who resolved a record (store.Record.ResolvedBy): a principal, or
	// "probe"; NULL on records resolved before it was kept, and on every
	// record not resolved. IF NOT EXISTS, as version 3.
	`ALTER TABLE {records} ADD COLUMN IF NOT EXISTS resolved_by text;`,
	// 5: the heartbeats of a fleet's nodes (fleet.go): one row per node
	// id, beat_at stamped by the server's clock (so that nodes' clocks
	// never decide who is dead), and the node's own lease, which every
	// other node applies to it.
	`CREATE TABLE IF NOT EXISTS {nodes} (
	node_id     text        NOT NULL,
	http_addr   text        NOT NULL,
	version     text        NOT NULL,
	incarnation text        NOT NULL,
	started_at  timestamptz NOT NULL,
	beat_at     timestamptz NOT NULL,
	lease_us    bigint      NOT NULL,
	CONSTRAINT {nodes_pkey} PRIMARY KEY (node_id),
	CONSTRAINT {nodes_lease} CHECK (lease_us > 0)
);`,
	// 6: leases (leases.go). The counts of meta and principals become
	// the records' counts plus the leases outstanding; each Store holds
	// leases of entries and bytes, store-wide (kind 0, principal '') and
	// per principal (kind 1), that its rounds use up without the meta
	// row. lim_entries and lim_bytes are the bounds the outstanding leases
	// were granted under (NULL: none outstanding; 0: no bound). seq comes
	// from a sequence, which starts after the last seq given (last_seq is
	// no longer kept).
	`ALTER TABLE {meta} ADD COLUMN IF NOT EXISTS lim_entries bigint, ADD COLUMN IF NOT EXISTS lim_bytes bigint;
ALTER TABLE {principals} ADD COLUMN IF NOT EXISTS lim_entries bigint, ADD COLUMN IF NOT EXISTS lim_bytes bigint;
CREATE TABLE IF NOT EXISTS {leases} (
	slot        text     NOT NULL,
	kind        smallint NOT NULL,
	principal   text     NOT NULL,
	entries     bigint   NOT NULL,
	bytes       bigint   NOT NULL,
	lim_entries bigint,
	lim_bytes   bigint,
	CONSTRAINT {leases_pkey} PRIMARY KEY (slot, kind, principal),
	CONSTRAINT {leases_left} CHECK (entries >= 0 AND bytes >= 0)
);
CREATE SEQUENCE IF NOT EXISTS {seq};
SELECT setval('{seq}', greatest(x.last, 1), x.last > 0)
FROM (SELECT greatest(mt.last_seq, (SELECT coalesce(max(seq), 0) FROM {records})) AS last FROM {meta} mt WHERE mt.singleton) x;`,
	// 7: the audit ledger (ledger.go). audit holds the entries, each as
	// its export line (bytea: the bytes hashed and exported, whatever the
	// database's encoding) with its seq and its time (for retention);
	// audit_head is one row, the chain's head and the checkpoint of the
	// last pruned entry, whose row lock serialises every append, so that
	// seq order is commit order (until version 9, which queues the
	// entries and chains them later). A database migrated here starts its chain
	// now: the decisions before it have no entries.
	`CREATE TABLE IF NOT EXISTS {audit} (
	seq  bigint      NOT NULL,
	at   timestamptz NOT NULL,
	line bytea       NOT NULL,
	CONSTRAINT {audit_pkey} PRIMARY KEY (seq)
);
CREATE TABLE IF NOT EXISTS {audit_head} (
	singleton boolean     NOT NULL DEFAULT true,
	seq       bigint      NOT NULL,
	hash      text        NOT NULL,
	cp_seq    bigint      NOT NULL,
	cp_hash   text        NOT NULL,
	signed_at timestamptz,
	CONSTRAINT {audit_head_pkey} PRIMARY KEY (singleton),
	CONSTRAINT {audit_head_one} CHECK (singleton)
);
INSERT INTO {audit_head} (seq, hash, cp_seq, cp_hash) VALUES (0, '` + audit.Genesis + `', 0, '` + audit.Genesis + `')
ON CONFLICT DO NOTHING;`,
	// 8: approval gates (approval.go). A gated record is reserved
	// awaiting_approval and keeps its gate (approvers, expires_at, and the
	// call's arguments and metadata, bytea as data is: kept byte for byte
	// and counted in the bytes, see recordSizeSQL) until a decision, which
	// it keeps too (decision_status: what the decision led to, running,
	// denied or expired; decided_by, decided_reason, decided_at). A record
	// has a gate exactly when expires_at is set, a decision exactly when
	// decision_status is. Every existing record has neither, and its bytes
	// are unchanged. rec_awaiting serves the expiry's listing of the
	// records awaiting a decision, a small part of the table.
	`ALTER TABLE {records} DROP CONSTRAINT IF EXISTS {rec_status};
ALTER TABLE {records} ADD CONSTRAINT {rec_status} CHECK (status IN ('running', 'interrupted', 'completed', 'failed', 'timed_out',
	'cancelled', 'awaiting_approval', 'denied', 'expired'));
ALTER TABLE {records} ADD COLUMN IF NOT EXISTS approvers text[], ADD COLUMN IF NOT EXISTS expires_at timestamptz,
	ADD COLUMN IF NOT EXISTS arguments bytea, ADD COLUMN IF NOT EXISTS metadata bytea,
	ADD COLUMN IF NOT EXISTS decision_status text, ADD COLUMN IF NOT EXISTS decided_by text,
	ADD COLUMN IF NOT EXISTS decided_reason text, ADD COLUMN IF NOT EXISTS decided_at timestamptz;
CREATE INDEX IF NOT EXISTS {rec_awaiting} ON {records} (seq) WHERE status = 'awaiting_approval';`,
	// 9: the audit ledger's queue (ledger.go, ledger_chain.go). A
	// deciding transaction no longer chains its entries under the head
	// row: it inserts one row here, its drafts in order (each its
	// canonical JSON, audit.Entry.Canonical, without seq or hashes), and
	// the chainer moves the committed rows onto the chain in id order.
	// The existing chain and head are untouched; a node of version 8 may
	// go on appending directly under the head row beside nodes that
	// queue (ledger_chain.go). Rows are inserted and deleted all the
	// time, and the table stays small: autovacuum visits it after every
	// thousand dead rows rather than after a fifth of the table.
	`CREATE TABLE IF NOT EXISTS {audit_queue} (
	id     bigserial NOT NULL,
	drafts bytea[]   NOT NULL,
	CONSTRAINT {audit_queue_pkey} PRIMARY KEY (id)
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);`,
}

// recordSizeSQL is store.RecordSize of a row of {records}, in SQL: the
// same fields' lengths in bytes (octet_length of text is its UTF-8
// length, as len of a Go string) plus store.RecordOverhead; a gated
// record's arguments and metadata count (version 8).
var recordSizeSQL = fmt.Sprintf(`(%d + octet_length(principal) + octet_length(session_id) + octet_length(request_id)
	+ octet_length(execution_id) + octet_length(tool) + octet_length(fingerprint) + octet_length(node_id)
	+ coalesce(octet_length(data), 0) + coalesce(octet_length(error), 0)
	+ coalesce(octet_length(arguments), 0) + coalesce(octet_length(metadata), 0))`, store.RecordOverhead)

// recordSizeV1SQL is recordSizeSQL of the columns a version 1 table has,
// which migration 2 sums (a released migration never changes).
var recordSizeV1SQL = fmt.Sprintf(`(%d + octet_length(principal) + octet_length(session_id) + octet_length(request_id)
	+ octet_length(execution_id) + octet_length(tool) + octet_length(fingerprint) + octet_length(node_id)
	+ coalesce(octet_length(data), 0) + coalesce(octet_length(error), 0))`, store.RecordOverhead)

// errSchemaNewer says that the tables were made by a newer build.
var errSchemaNewer = errors.New("run a newer build")

// names names a store's tables: a schema and a table prefix.
type names struct {
	schema string
	prefix string
}

// placeholder is a braced name in a statement of this package.
var placeholder = regexp.MustCompile(`\{[a-z_]+\}`)

// tables are the placeholders that stand for schema-qualified tables; every
// other placeholder is a constraint or an index, named with the prefix and
// unqualified (it lives in its table's schema).
var tables = map[string]bool{"records": true, "meta": true, "principals": true, "schema_version": true, "nodes": true, "leases": true, "seq": true, "audit": true, "audit_head": true,
	"audit_queue": true}

// expand replaces the braced names in a statement with quoted identifiers.
func (n names) expand(sql string) string {
	return placeholder.ReplaceAllStringFunc(sql, func(m string) string {
		name := m[1 : len(m)-1]
		if tables[name] {
			return pgx.Identifier{n.schema, n.prefix + name}.Sanitize()
		}
		return pgx.Identifier{n.prefix + name}.Sanitize()
	})
}

// lockKey is the advisory lock that serialises migrations of one schema,
// whatever the table prefix, so that concurrent Opens neither race to
// create the schema nor apply a version twice.
func (n names) lockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("carmy/store/postgres migrate\x00"))
	h.Write([]byte(n.schema))
	return int64(h.Sum64())
}

// cancelChannel is the channel a Cancel notifies, in the transaction that
// records it, with the execution id as the payload: a Fleet listens on it
// and cancels the tool wherever it runs. One per schema and prefix (a
// channel is database-wide), at most 63 bytes.
func (n names) cancelChannel() string { return fmt.Sprintf("carmy_cancel_%016x", n.hash("cancel")) }

// proberKey is the session advisory lock whose holder runs the fleet's
// reconcile probes (fleet_listen.go).
func (n names) proberKey() int64 { return int64(n.hash("prober")) }

// hash is a 64-bit hash of what, the schema and the prefix.
func (n names) hash(what string) uint64 {
	h := fnv.New64a()
	h.Write([]byte("carmy/store/postgres " + what + "\x00" + n.schema + "\x00" + n.prefix))
	return h.Sum64()
}

// resolveSchema returns the schema to use: the configured one, or the
// connection's current schema.
func resolveSchema(ctx context.Context, pool *pgxpool.Pool, configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	var schema *string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return "", readErr("resolve schema", err)
	}
	if schema == nil {
		return "", errors.New("postgres: no schema of the search_path exists; set Config.Schema")
	}
	return *schema, nil
}

// migrate brings the tables to SchemaVersion in one transaction, under
// the schema's advisory lock: several processes may open the store at
// once, and each finds the tables either untouched or migrated.
func migrate(ctx context.Context, pool *pgxpool.Pool, n names, createSchema bool, log *slog.Logger) error {
	// READ COMMITTED (readCommitted): the version is read after the lock
	// is granted, and must include what the previous holder committed.
	tx, err := pool.BeginTx(ctx, readCommitted)
	if err != nil {
		return readErr("migrate", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", n.lockKey()); err != nil {
		return readErr("migrate: lock", err)
	}
	if createSchema {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{n.schema}.Sanitize()); err != nil {
			return fmt.Errorf("postgres: migrate: create schema %q: %w", n.schema, err)
		}
	}
	if _, err := tx.Exec(ctx, n.expand(`CREATE TABLE IF NOT EXISTS {schema_version} (
	version    integer     NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now(),
	CONSTRAINT {version_pkey} PRIMARY KEY (version)
)`)); err != nil {
		return fmt.Errorf("postgres: migrate: version table: %w", err)
	}
	var current int
	if err := tx.QueryRow(ctx, n.expand("SELECT coalesce(max(version), 0) FROM {schema_version}")).Scan(&current); err != nil {
		return readErr("migrate: read version", err)
	}
	if current > SchemaVersion {
		return fmt.Errorf("postgres: the tables in schema %q are at version %d, newer than this build's %d: %w",
			n.schema, current, SchemaVersion, errSchemaNewer)
	}
	for v := current + 1; v <= SchemaVersion; v++ {
		if _, err := tx.Exec(ctx, n.expand(migrations[v-1])); err != nil {
			return fmt.Errorf("postgres: migrate to version %d: %w", v, err)
		}
		if _, err := tx.Exec(ctx, n.expand("INSERT INTO {schema_version} (version) VALUES ($1)"), v); err != nil {
			return fmt.Errorf("postgres: migrate to version %d: %w", v, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: migrate: commit: %w", err)
	}
	if current < SchemaVersion {
		log.Info("postgres store: tables migrated", slog.String("schema", n.schema),
			slog.String("prefix", n.prefix), slog.Int("from", current), slog.Int("to", SchemaVersion))
	}
	return nil
}
