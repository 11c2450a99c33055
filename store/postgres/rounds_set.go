package postgres

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store"
)

// A round first tries its reservations, then its completions, as one
// statement each (reserveAll, completeAll): a statement over arrays costs
// the server about as much as one member's statement, and the round holds
// the meta row while its statements run, so that cost bounds how many
// rounds the database commits a second (measured with pg_stat_statements
// under carmy bench: with one statement per member, the round's
// statements kept the lock busy nearly all the time).
//
// Each applies only when every one of its members would succeed if they
// ran one after the other in the round's order (for reserveAll: a held
// identity is answered from its record, unless the record is past its
// dedupe window; every vacant identity's execution id is unused, and every
// bound leaves room for the vacant members before it and itself; for
// completeAll: every outcome fits), and then writes exactly what running
// them in that order would have written: the same seqs, counts and bytes.
// Otherwise it writes nothing, and the round runs its members one
// statement each (reserve, complete), which decide each in turn. So far
// from the bounds a round is one statement of each kind, and at a bound
// the answers are the same as before.

// roundMembersCTE begins the statements that reserve a round's members
// (reserveAllSQL, reserveOwnSQL): i, the members in the round's order
// (the arrays $1-$13, $15 and $16, numbered n); h, the held ones with their
// records; v, the vacant ones; c, the vacant ones with their rank in the
// round and within their principal and the bytes of the vacant members
// before them (all, and their principal's). What follows names the next
// part of the WITH.
const roundMembersCTE = `WITH i AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
		$8::timestamptz[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $15::bigint[], $16::boolean[])
		WITH ORDINALITY AS i(principal, session_id, request_id, execution_id, tool, fingerprint, node_id,
			started_at, quota, byte_quota, ask, max_bytes, size, window_us, retry, n)
), h AS (
	SELECT i.n, i.fingerprint AS asked, i.started_at AS asked_at, i.window_us, i.retry, r.*
	FROM i JOIN {records} r ON r.principal = i.principal AND r.session_id = i.session_id AND r.request_id = i.request_id
), v AS (
	SELECT i.* FROM i WHERE NOT EXISTS (SELECT 1 FROM h WHERE h.n = i.n)
), c AS (
	SELECT v.*, row_number() OVER (ORDER BY v.n) AS vrank,
		row_number() OVER (PARTITION BY v.principal ORDER BY v.n) AS prank,
		coalesce(sum(v.size) OVER (PARTITION BY v.principal ORDER BY v.n ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS pprev,
		coalesce(sum(v.size) OVER (ORDER BY v.n ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS sprev
	FROM v
), `

// heldReplacedSQL is true when some held member's record is to be
// replaced (store.Execution.Held says Reserved): past its dedupe window,
// or timed_out or interrupted under RetryUncertain. Its replacement is
// then decided by reserve, one statement per member.
const heldReplacedSQL = `EXISTS (SELECT 1 FROM h WHERE h.fingerprint = h.asked AND (
			(h.window_us > 0 AND h.status IN ('completed', 'failed', 'timed_out', 'cancelled', 'denied', 'expired')
				AND h.started_at <= h.asked_at - h.window_us * interval '1 microsecond')
			OR (h.retry AND h.status IN ('timed_out', 'interrupted'))))`

// reserveAllSQL answers every member of a round whose identity is held
// from its record, and reserves every other member, or writes nothing:
// $1-$13 arrays, one element per member in the round's order (principal,
// session, request id, execution id, tool, fingerprint, node id, started
// at, quota, byte quota, the room asked: the record's size and the
// headroom, the store's bound on bytes, the record's size), $14 the
// capacity, $15 the members' dedupe windows (microseconds; 0: none), $16
// their RetryUncertain flags. It
// returns one row per member in order: fits, then the new record's seq and
// started at when it reserved, then the held record's columns when the
// identity is held (all NULL otherwise). fits is false, and nothing
// written, when a vacant member would be refused, a vacant member's
// execution id is in use, a held record is to be replaced (past its dedupe
// window, or uncertain under RetryUncertain: heldReplacedSQL), or a member is vacant and the
// transaction holds no lock (it took no transaction id: a lock taken only
// for a vacant identity found every identity held, and one was released
// since; reserveOwn's case).
var reserveAllSQL = roundMembersCTE + `ok AS (
	SELECT (NOT EXISTS (SELECT 1 FROM v)
			OR (txid_current_if_assigned() IS NOT NULL AND mt.entries + (SELECT count(*) FROM v) <= $14::bigint))
		AND NOT EXISTS (SELECT 1 FROM {records} r JOIN v ON r.execution_id = v.execution_id)
		AND NOT ` + heldReplacedSQL + `
		AND coalesce((SELECT bool_and((c.quota = 0 OR coalesce(pr.entries, 0) + c.prank <= c.quota)
			AND (c.max_bytes = 0 OR mt.bytes + c.sprev + c.ask <= c.max_bytes)
			AND (c.byte_quota = 0 OR coalesce(pr.bytes, 0) + c.pprev + c.ask <= c.byte_quota))
			FROM c LEFT JOIN {principals} pr ON pr.principal = c.principal), true) AS fits,
		mt.entries
	FROM {meta} mt WHERE mt.singleton
), ins AS (
	INSERT INTO {records} (principal, session_id, request_id, execution_id, seq, tool, fingerprint, status, node_id, started_at)
	SELECT c.principal, c.session_id, c.request_id, c.execution_id, nextval('{seq}'), c.tool, c.fingerprint, 'running', c.node_id, c.started_at
	FROM c, ok WHERE ok.fits ORDER BY c.vrank
	RETURNING execution_id, seq, started_at
), m AS (
	UPDATE {meta} SET entries = entries + (SELECT count(*) FROM v), bytes = bytes + (SELECT coalesce(sum(size), 0) FROM v)
	WHERE singleton AND (SELECT fits FROM ok) AND EXISTS (SELECT 1 FROM v)
), pc AS (
	SELECT principal, count(*) AS n, sum(size) AS size FROM v GROUP BY principal
), p AS (
	INSERT INTO {principals} AS pr (principal, entries, bytes) SELECT pc.principal, pc.n, pc.size FROM pc, ok WHERE ok.fits
	ON CONFLICT (principal) DO UPDATE SET entries = pr.entries + excluded.entries, bytes = pr.bytes + excluded.bytes
)
SELECT ok.fits, ins.seq, ins.started_at, ` + recordColumnsOf("h") + `
FROM ok CROSS JOIN i LEFT JOIN ins ON ins.execution_id = i.execution_id LEFT JOIN h ON h.n = i.n
ORDER BY i.n`

// completeAllSQL settles every member of a round or none: $1-$12 arrays,
// one element per member (principal, session, request id, fingerprint,
// execution id, status, data, error, finished at, the outcome's size, the
// byte quota, the store's bound on bytes). It applies when every outcome
// fits with the outcomes before it (store.Overflow) and every record is
// open under its execution; it returns one row per member in order (its
// record), or one row with fits false and no record.
var completeAllSQL = `WITH i AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[], $8::bytea[],
		$9::timestamptz[], $10::bigint[], $11::bigint[], $12::bigint[])
		WITH ORDINALITY AS i(principal, session_id, request_id, fingerprint, execution_id, status, data, error,
			finished_at, delta, byte_quota, max_bytes, n)
), c AS (
	SELECT i.*, sum(i.delta) OVER (PARTITION BY i.principal ORDER BY i.n) AS pcum, sum(i.delta) OVER (ORDER BY i.n) AS scum FROM i
), ok AS (
	SELECT (SELECT count(*) FROM {records} r JOIN i ON r.principal = i.principal AND r.session_id = i.session_id
			AND r.request_id = i.request_id AND r.fingerprint = i.fingerprint AND r.execution_id = i.execution_id
			AND r.status IN ('running', 'interrupted')) = (SELECT count(*) FROM i)
		AND coalesce((SELECT bool_and(c.delta <= 0 OR ((c.byte_quota = 0 OR coalesce(pr.bytes, 0) + c.pcum <= c.byte_quota)
			AND (c.max_bytes = 0 OR mt.bytes + c.scum <= c.max_bytes)))
			FROM c LEFT JOIN {principals} pr ON pr.principal = c.principal), true) AS fits
	FROM {meta} mt WHERE mt.singleton
), u AS (
	UPDATE {records} AS r SET status = i.status, data = i.data, error = i.error, finished_at = i.finished_at
	FROM i, ok
	WHERE ok.fits AND r.principal = i.principal AND r.session_id = i.session_id AND r.request_id = i.request_id
		AND r.fingerprint = i.fingerprint AND r.execution_id = i.execution_id AND r.status IN ('running', 'interrupted')
	RETURNING i.n, ` + recordColumnsOf("r") + `
), m AS (
	UPDATE {meta} SET bytes = bytes + (SELECT sum(delta) FROM i) WHERE singleton AND (SELECT fits FROM ok)
), pc AS (
	SELECT principal, sum(delta) AS delta FROM i GROUP BY principal
), p AS (
	UPDATE {principals} AS pr SET bytes = pr.bytes + pc.delta FROM pc, ok WHERE ok.fits AND pr.principal = pc.principal
)
SELECT ok.fits, ` + recordColumnsOf("u") + ` FROM ok LEFT JOIN u ON true ORDER BY u.n`

// recordColumnsOf is recordColumns qualified by a table's alias.
func recordColumnsOf(alias string) string {
	return alias + ".principal, " + alias + ".session_id, " + alias + ".request_id, " + alias + ".execution_id, " +
		alias + ".seq, " + alias + ".tool, " + alias + ".fingerprint, " + alias + ".status, " + alias + ".node_id, " +
		alias + ".started_at, " + alias + ".finished_at, " + alias + ".data, " + alias + ".error, " +
		alias + ".resolved, " + alias + ".resolved_by, " + qualified(alias, gateColumns)
}

// reserveArgs are reserveAll's arguments for batch (reserveOwn's, but
// the slot).
func (s *Store) reserveArgs(batch []*reservation) []any {
	n := len(batch)
	var (
		principal, session, request, id, tool, fp, node = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		started                                         = make([]time.Time, n)
		quota, byteQuota, ask, maxBytes, size, window   = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		retry                                           = make([]bool, n)
	)
	for i, it := range batch {
		principal[i], session[i], request[i] = it.key.Principal, it.key.Session, it.key.RequestID
		id[i], tool[i], fp[i], node[i], started[i] = it.exec.ID, it.exec.Tool, it.fingerprint, it.exec.NodeID, it.exec.StartedAt
		size[i] = store.RecordSize(store.Record{Key: it.key, ExecutionID: it.exec.ID, Tool: it.exec.Tool, Fingerprint: it.fingerprint, NodeID: it.exec.NodeID})
		quota[i], byteQuota[i], ask[i], maxBytes[i] = int64(it.exec.Quota), it.exec.ByteQuota, size[i]+it.exec.Headroom, it.maxBytes
		window[i], retry[i] = it.exec.DedupeWindow.Microseconds(), it.exec.RetryUncertain
	}
	return []any{principal, session, request, id, tool, fp, node, started, quota, byteQuota, ask, maxBytes, size, int64(s.cfg.Capacity), window, retry}
}

// readReserveAll reads reserveAll's answer: whether it applied, and then
// each member's answer and what decided it (decidedAnswer for a held
// identity, decidedReserved for a reservation).
func readReserveAll(br pgx.BatchResults, batch []*reservation) (bool, []reserveResult, []decision, error) {
	rows, err := br.Query()
	if err != nil {
		return false, nil, nil, err
	}
	defer rows.Close()
	outs := make([]reserveResult, 0, len(batch))
	kinds := make([]decision, 0, len(batch))
	fits := true
	for rows.Next() {
		var (
			fit     *bool
			seq     *int64
			started *time.Time
		)
		rec, err := scanFitRecord(rows, &fit, &seq, &started)
		if err != nil {
			return false, nil, nil, err
		}
		fits = fits && fit != nil && *fit
		if !fits || len(outs) == len(batch) {
			continue
		}
		it := batch[len(outs)]
		switch {
		case seq != nil && started != nil:
			outs = append(outs, reserveResult{res: store.Reservation{Outcome: store.Reserved, Record: reservedRecord(it, *seq, *started)}})
			kinds = append(kinds, decidedReserved)
		case rec != nil && rec.Key == it.key:
			outs = append(outs, reserveResult{res: answer(*rec, it.fingerprint)})
			kinds = append(kinds, decidedAnswer)
		default:
			fits = false
		}
	}
	if err := rows.Err(); err != nil {
		return false, nil, nil, err
	}
	if !fits || len(outs) != len(batch) {
		return false, nil, nil, nil
	}
	return true, outs, kinds, nil
}

// completeArgs are completeAll's arguments for settles (completeOwn's,
// but the slot).
func completeArgs(settles []*completion) []any {
	n := len(settles)
	var (
		principal, session, request, fp, id, status = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		data, errBody                               = make([][]byte, n), make([][]byte, n)
		finished                                    = make([]*time.Time, n)
		delta, byteQuota, maxBytes                  = make([]int64, n), make([]int64, n), make([]int64, n)
	)
	for i, c := range settles {
		principal[i], session[i], request[i], fp[i], id[i] = c.key.Principal, c.key.Session, c.key.RequestID, c.fingerprint, c.res.ExecutionID
		status[i], data[i], errBody[i], finished[i] = string(c.res.Status), []byte(c.res.Data), []byte(c.res.Error), finishedAt(c.res)
		delta[i], byteQuota[i], maxBytes[i] = store.OutcomeSize(c.res.Data, c.res.Error), c.res.ByteQuota, c.maxBytes
	}
	return []any{principal, session, request, fp, id, status, data, errBody, finished, delta, byteQuota, maxBytes}
}

// readCompleteAll reads completeAll's answer: whether it settled them
// all, and then each one's record.
func readCompleteAll(br pgx.BatchResults, n int) (bool, []completeResult, error) {
	rows, err := br.Query()
	if err != nil {
		return false, nil, err
	}
	defer rows.Close()
	outs := make([]completeResult, 0, n)
	fits := false
	for rows.Next() {
		var fit *bool
		rec, err := scanFitRecord(rows, &fit)
		if err != nil {
			return false, nil, err
		}
		fits = fit != nil && *fit
		if fits && rec != nil && len(outs) < n {
			outs = append(outs, completeResult{rec: *rec, applied: true})
		}
	}
	if err := rows.Err(); err != nil {
		return false, nil, err
	}
	if !fits || len(outs) != n {
		return false, nil, nil
	}
	return true, outs, nil
}

// scanFitRecord reads a row of completeAll or reserveAll: fits, then the
// columns of lead (reserveAll's seq and started at), then a record whose
// columns are all NULL when the row has none (nil).
func scanFitRecord(rows pgx.Rows, fit **bool, lead ...any) (*store.Record, error) {
	var (
		principal, session, request, id, tool, fp, status, node *string
		seq                                                     *int64
		started, finished                                       *time.Time
		data, errBody                                           []byte
		resolved                                                *bool
		by                                                      *string
		gate                                                    gateCols
	)
	dest := append(append([]any{fit}, lead...), &principal, &session, &request, &id, &seq, &tool, &fp, &status, &node,
		&started, &finished, &data, &errBody, &resolved, &by)
	if err := rows.Scan(append(dest, gate.dest()...)...); err != nil {
		return nil, err
	}
	if id == nil {
		return nil, nil
	}
	r := &store.Record{
		Key:         store.Key{Principal: *principal, Session: *session, RequestID: *request},
		ExecutionID: *id, Seq: uint64(*seq), Tool: *tool, Fingerprint: *fp, Status: store.Status(*status),
		NodeID: *node, StartedAt: started.UTC(), Data: data, Error: errBody, Resolved: *resolved,
	}
	if by != nil {
		r.ResolvedBy = *by
	}
	if finished != nil {
		r.FinishedAt = finished.UTC()
	}
	gate.fill(r)
	return r, nil
}
