package postgres

// queries holds a Store's statements, with its tables' names in them. The
// statements are fixed per Store, so pgx prepares each once per
// connection.
type queries struct {
	get, lookup, stats, interrupted string

	// runningNodes names the nodes of the running records (their partial
	// index holds exactly those).
	runningNodes string

	reserve string

	// reserveAll and completeAll are a round's reservations and
	// completions in one statement each, all or nothing (rounds_set.go).
	reserveAll, completeAll string

	// The leases (leases.go): a round's statements on its Store's own
	// leases, the grant of more, and the fold of every lease back into
	// the counts.
	lockLeases, reserveOwn, completeOwn, refill, lockAllLeases, fold string

	complete, cancel, resolve, markInterrupted string

	// getForUpdate reads and locks a record; decide writes a decision on
	// it (approval.go).
	getForUpdate, decide string

	lockMeta, release, expire, prunePrincipals string

	// bytesOf reads, under the meta row's lock, the store's bytes and one
	// principal's; addBytes adds to both.
	bytesOf, addBytes string
}

func newQueries(n names) queries {
	x := func(sql string) string { return n.expand(sql) }
	return queries{
		get:    x(`SELECT ` + recordColumns + ` FROM {records} WHERE execution_id = $1`),
		lookup: x(`SELECT ` + recordColumns + ` FROM {records} WHERE principal = $1 AND session_id = $2 AND request_id = $3`),
		// The counts less the leases outstanding (leases.go).
		stats: x(`SELECT mt.entries - coalesce((SELECT sum(entries) FROM {leases} WHERE kind = 0), 0),
	mt.bytes - coalesce((SELECT sum(bytes) FROM {leases} WHERE kind = 0), 0) FROM {meta} mt WHERE mt.singleton`),
		runningNodes: x(`SELECT DISTINCT node_id FROM {records} WHERE status = 'running' ORDER BY node_id`),
		// interrupted scans the records (for a gauge, not for calls).
		interrupted: x(`SELECT count(*) FROM {records} WHERE status = 'interrupted'`),

		// One reservation, all or nothing, in a transaction that already
		// holds the meta row (lockMeta): no other transaction can then
		// insert or delete a record, or change a counter, so the statement's
		// snapshot is the current state and its checks are exact. It
		// returns one row: the checks, the new record's seq (NULL unless it
		// reserved), and the identity's record when it is held.
		// $1 capacity, $2-$4 the key, $5 execution id, $6 tool,
		// $7 fingerprint, $8 node id, $9 started at, $10 quota,
		// $11 byte quota, $12 the room asked (the record's size and the
		// headroom), $13 the store's bound on bytes (0: none), $14 the
		// record's size, $15 the dedupe window (microseconds; 0: none),
		// $16 RetryUncertain, $17-$20 the gate (approvers, expires at,
		// arguments, metadata; all NULL for an ungated execution, which is
		// reserved running, a gated one awaiting_approval). The checks are
		// those of store.State.Reserve,
		// in its order. A finished record of the same fingerprint that the
		// window has expired (store.Execution.Expired), or a timed_out or
		// interrupted one under RetryUncertain (store.Execution.Retries),
		// is replaced in place (upd):
		// the counts stay, its bytes are given back, last_seq moves.
		reserve: x(`WITH cur AS (
	SELECT ` + recordColumns + ` FROM {records}
	WHERE principal = $2::text AND session_id = $3::text AND request_id = $4::text
), base AS (
	SELECT NOT EXISTS (SELECT 1 FROM cur) AS vacant,
		EXISTS (SELECT 1 FROM cur WHERE cur.fingerprint = $7::text AND (
			($15::bigint > 0 AND cur.status IN ('completed', 'failed', 'timed_out', 'cancelled', 'denied', 'expired')
				AND cur.started_at <= $9::timestamptz - $15::bigint * interval '1 microsecond')
			OR ($16::boolean AND cur.status IN ('timed_out', 'interrupted')))) AS stale,
		coalesce((SELECT ` + recordSizeSQL + ` FROM cur), 0) AS held_size,
		NOT EXISTS (SELECT 1 FROM {records} WHERE execution_id = $5::text) AS fresh_id,
		mt.entries < $1::bigint AS room,
		($10::bigint = 0 OR coalesce((SELECT entries FROM {principals} WHERE principal = $2::text), 0) < $10::bigint) AS under_quota,
		mt.bytes AS bytes,
		coalesce((SELECT bytes FROM {principals} WHERE principal = $2::text), 0) AS principal_bytes
	FROM {meta} mt WHERE mt.singleton
), freeing AS (
	SELECT base.*, CASE WHEN base.stale THEN base.held_size ELSE 0 END AS freed FROM base
), cond AS (
	SELECT freeing.*,
		($13::bigint = 0 OR freeing.bytes + $12::bigint - freeing.freed <= $13::bigint) AS room_bytes,
		($11::bigint = 0 OR freeing.principal_bytes + $12::bigint - freeing.freed <= $11::bigint) AS under_byte_quota
	FROM freeing
), upd AS (
	UPDATE {records} AS r SET execution_id = $5::text, seq = nextval('{seq}'), tool = $6::text,
		status = CASE WHEN $18::timestamptz IS NULL THEN 'running' ELSE 'awaiting_approval' END,
		node_id = $8::text, started_at = $9::timestamptz, finished_at = NULL, data = NULL, error = NULL, resolved = false, resolved_by = NULL,
		approvers = $17::text[], expires_at = $18::timestamptz, arguments = $19::bytea, metadata = $20::bytea,
		decision_status = NULL, decided_by = NULL, decided_reason = NULL, decided_at = NULL
	FROM cond
	WHERE cond.stale AND cond.fresh_id AND cond.room_bytes AND cond.under_byte_quota
		AND r.principal = $2::text AND r.session_id = $3::text AND r.request_id = $4::text
	RETURNING r.seq, r.started_at
), ins AS (
	INSERT INTO {records} (principal, session_id, request_id, execution_id, seq, tool, fingerprint, status, node_id, started_at,
		approvers, expires_at, arguments, metadata)
	SELECT $2::text, $3::text, $4::text, $5::text, nextval('{seq}'), $6::text, $7::text,
		CASE WHEN $18::timestamptz IS NULL THEN 'running' ELSE 'awaiting_approval' END, $8::text, $9::timestamptz,
		$17::text[], $18::timestamptz, $19::bytea, $20::bytea FROM cond
	WHERE cond.vacant AND cond.fresh_id AND cond.room AND cond.under_quota AND cond.room_bytes AND cond.under_byte_quota
	ON CONFLICT (principal, session_id, request_id) DO NOTHING
	RETURNING seq, started_at
), m AS (
	UPDATE {meta} SET entries = entries + (SELECT count(*) FROM ins),
		bytes = bytes + $14::bigint - (SELECT CASE WHEN EXISTS (SELECT 1 FROM upd) THEN cond.freed ELSE 0 END FROM cond)
	FROM (SELECT seq FROM ins UNION ALL SELECT seq FROM upd) x WHERE singleton
), p AS (
	INSERT INTO {principals} AS pr (principal, entries, bytes) SELECT $2::text, 1, $14::bigint FROM ins
	ON CONFLICT (principal) DO UPDATE SET entries = pr.entries + 1, bytes = pr.bytes + $14::bigint
), pu AS (
	UPDATE {principals} AS pr SET bytes = pr.bytes + $14::bigint - cond.freed
	FROM cond, upd WHERE pr.principal = $2::text
)
SELECT cond.fresh_id, cond.room, cond.under_quota, cond.room_bytes, cond.under_byte_quota, cond.stale,
	coalesce(ins.seq, upd.seq), coalesce(ins.started_at, upd.started_at),
	cur.execution_id, cur.seq, cur.tool, cur.fingerprint, cur.status, cur.node_id, cur.started_at,
	cur.finished_at, cur.data, cur.error, cur.resolved, cur.resolved_by, ` + qualified("cur", gateColumns) + `
FROM cond LEFT JOIN ins ON true LEFT JOIN upd ON true LEFT JOIN cur ON true`),

		reserveAll:  x(reserveAllSQL),
		completeAll: x(completeAllSQL),

		lockLeases:    x(lockLeasesSQL),
		reserveOwn:    x(reserveOwnSQL),
		completeOwn:   x(completeOwnSQL),
		refill:        x(refillSQL),
		lockAllLeases: x(`SELECT count(*) FROM (SELECT 1 FROM {leases} ORDER BY slot, kind, principal FOR UPDATE) l`),
		fold:          x(foldSQL),

		// The conditional writes: each applies only to a record its WHERE
		// admits, and returns it; no row means refused (the caller reads
		// the record to say why). cancel and resolve run in a
		// transaction that holds the meta row, and add the bytes of the
		// outcome (addBytes) when they applied: an open record holds no
		// data and no error, so that is how much the record grew.
		// complete is one completion of a round (rounds_complete.go), which
		// holds the meta row: it records the outcome when it fits
		// (store.Overflow, k = 0), else the failure that says which bound it
		// would exceed (k = 1 the principal's bytes, 2 the store's), and
		// adds what it recorded to the bytes. $1-$3 the key,
		// $4 fingerprint, $5 execution id, $6 status, $7 data, $8 error,
		// $9 finished at, $10 the outcome's size, $11 the byte quota,
		// $12 the store's bound on bytes (0: none), $13 and $14 the errors
		// recorded instead for k = 1 and k = 2.
		complete: x(`WITH b AS (
	SELECT mt.bytes AS store_bytes,
		coalesce((SELECT bytes FROM {principals} WHERE principal = $1::text), 0) AS principal_bytes
	FROM {meta} mt WHERE mt.singleton
), o AS (
	SELECT CASE
		WHEN $10::bigint <= 0 THEN 0
		WHEN $11::bigint > 0 AND b.principal_bytes + $10::bigint > $11::bigint THEN 1
		WHEN $12::bigint > 0 AND b.store_bytes + $10::bigint > $12::bigint THEN 2
		ELSE 0 END AS k
	FROM b
), u AS (
	UPDATE {records} AS r SET status = CASE o.k WHEN 0 THEN $6::text ELSE 'failed' END,
		data = CASE o.k WHEN 0 THEN $7::bytea END,
		error = CASE o.k WHEN 0 THEN $8::bytea WHEN 1 THEN $13::bytea ELSE $14::bytea END,
		finished_at = $9::timestamptz
	FROM o
	WHERE r.principal = $1::text AND r.session_id = $2::text AND r.request_id = $3::text
		AND r.fingerprint = $4::text AND r.execution_id = $5::text AND r.status IN ('running', 'interrupted')
	RETURNING ` + recordColumns + `, coalesce(octet_length(data), 0) + coalesce(octet_length(error), 0) AS grown
), m AS (
	UPDATE {meta} SET bytes = bytes + (SELECT grown FROM u) WHERE singleton AND EXISTS (SELECT 1 FROM u)
), p AS (
	UPDATE {principals} SET bytes = bytes + (SELECT grown FROM u) WHERE principal = $1::text AND EXISTS (SELECT 1 FROM u)
)
SELECT ` + recordColumns + ` FROM u`),
		cancel: x(`UPDATE {records} SET status = 'cancelled', data = $2, error = $3, finished_at = $4
WHERE execution_id = $1 AND status = 'running'
RETURNING ` + recordColumns),
		resolve: x(`UPDATE {records} SET status = $2, data = $3, error = $4, finished_at = $5, resolved = true, resolved_by = nullif($7, '')
WHERE execution_id = $1 AND (status = 'interrupted' OR (status = 'running' AND $6::boolean))
RETURNING ` + recordColumns),
		getForUpdate: x(`SELECT ` + recordColumns + ` FROM {records} WHERE execution_id = $1 FOR UPDATE`),
		// $1 execution id, $2 the status the decision leads to, $3 the
		// node id (an approval's runner), $4 whether it approves (a new
		// seq), $5 the error and $6 the finish time of a denial or an
		// expiry, $7-$9 who decided, why and when.
		decide: x(`UPDATE {records} SET status = $2, node_id = $3, seq = CASE WHEN $4::boolean THEN nextval('{seq}') ELSE seq END,
	error = $5, finished_at = $6, decision_status = $2, decided_by = $7, decided_reason = $8, decided_at = $9
WHERE execution_id = $1 AND status = 'awaiting_approval'
RETURNING ` + recordColumns),
		markInterrupted: x(`UPDATE {records} SET status = 'interrupted' WHERE node_id = $1 AND status = 'running'
RETURNING ` + recordColumns),

		// Every transaction that adds or removes records holds the meta row
		// first: it is the lock that makes counts exact, and taking it first
		// means no two writers wait for each other in opposite orders.
		lockMeta: x(`SELECT entries FROM {meta} WHERE singleton FOR UPDATE`),
		release: x(`WITH d AS (
	DELETE FROM {records}
	WHERE execution_id = $1 AND (status = 'interrupted' OR (status = 'running' AND $2::boolean))
	RETURNING ` + recordColumns + `, ` + recordSizeSQL + ` AS size
), m AS (
	UPDATE {meta} SET entries = entries - 1, bytes = bytes - (SELECT sum(size) FROM d)
	WHERE singleton AND EXISTS (SELECT 1 FROM d)
), p AS (
	UPDATE {principals} AS pr SET entries = pr.entries - 1, bytes = pr.bytes - d.size FROM d WHERE pr.principal = d.principal
)
SELECT ` + recordColumns + ` FROM d`),
		expire: x(`WITH d AS (
	DELETE FROM {records}
	WHERE finished_at < $1 AND status IN ('completed', 'failed', 'timed_out', 'cancelled', 'denied', 'expired')
	RETURNING principal, ` + recordSizeSQL + ` AS size
), c AS (
	SELECT principal, count(*) AS n, sum(size) AS size FROM d GROUP BY principal
), p AS (
	UPDATE {principals} AS pr SET entries = pr.entries - c.n, bytes = pr.bytes - c.size FROM c WHERE pr.principal = c.principal
), m AS (
	UPDATE {meta} SET entries = entries - (SELECT count(*) FROM d), bytes = bytes - (SELECT sum(size) FROM d)
	WHERE singleton AND EXISTS (SELECT 1 FROM d)
)
SELECT count(*) FROM d`),
		// A principal with leases outstanding (lims set) keeps its row;
		// Expire folds the leases first (inTx), so none are.
		prunePrincipals: x(`DELETE FROM {principals} WHERE entries = 0 AND bytes = 0 AND lim_entries IS NULL AND lim_bytes IS NULL`),

		bytesOf: x(`SELECT mt.bytes, coalesce((SELECT bytes FROM {principals} WHERE principal = $1), 0) FROM {meta} mt WHERE mt.singleton`),
		addBytes: x(`WITH m AS (
	UPDATE {meta} SET bytes = bytes + $2 WHERE singleton
)
UPDATE {principals} SET bytes = bytes + $2 WHERE principal = $1`),
	}
}
