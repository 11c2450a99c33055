package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store"
)

// Leases let the rounds of several Stores on one database commit side by
// side. The meta row and a principal's row count the records plus the
// leases outstanding: a lease is an amount of entries and of bytes,
// store-wide (kind 0) or of one principal (kind 1), held by one Store (its
// slot, random per Store) in a row of {leases} that only that Store's
// rounds use up. A round whose members fit in its Store's leases (and
// whose bounds are those the leases were granted under) reserves and
// completes against them alone, holding no row another Store's round
// needs (ownRound). Since every lease was counted when granted, the
// records' counts plus every lease never exceed a bound the leases were
// granted under, so such a round never admits past one.
//
// A round that does not fit takes the meta row and first asks for more
// (refill): the room it needs and a share of what is left (a quarter, at
// most leaseEntries and leaseBytes), granted only when the counts, leases
// included, leave room for it under the same bounds. When they do not (a
// bound is near, or was changed), the round folds every Store's leases
// back into the counts (fold: it waits for the rounds that hold them, and
// takes them), so that the counts are the records' exactly, and decides
// every member as before, under the meta row (reserveAll, completeAll,
// then one statement each). So a bound is reached exactly as one Store
// reaches it, and STORE_FULL and QUOTA answers are the same; far from the
// bounds each Store takes the meta row about once per leaseEntries new
// records. A Store that stops (or dies) leaves its leases counted until
// the next fold, which any Store runs when it needs the room.
//
// Lock order, so that no two transactions wait for each other: the meta
// row, then lease rows in (slot, kind, principal) order (a round locks its
// own before it writes any record: lockLeases), then records. A Store's
// own round locks only its own lease rows; a fold (under the meta row)
// locks all of them.

// noBound is a bound refill leaves alone: its dimension is not asked.
const noBound = -1

// newSlot returns a Store's slot: random, so that a restarted process
// never uses the leases of its previous run (a fold returns them).
func newSlot() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lockLeasesSQL locks a round's own lease rows (store-wide and those of
// the principals $2), in lock order, when the round writes: it has
// completions ($3), or one of its identities ($4-$6) is vacant. A round
// of replays locks nothing (and writes nothing).
const lockLeasesSQL = `SELECT 1 FROM {leases} l WHERE l.slot = $1::text AND (l.kind = 0 OR l.principal = ANY($2::text[]))
	AND ($3::boolean OR EXISTS (SELECT 1 FROM unnest($4::text[], $5::text[], $6::text[]) AS k(principal, session_id, request_id)
		WHERE NOT EXISTS (SELECT 1 FROM {records} r
			WHERE r.principal = k.principal AND r.session_id = k.session_id AND r.request_id = k.request_id)))
ORDER BY l.kind, l.principal FOR UPDATE OF l`

// reserveOwnSQL is reserveAllSQL against the slot's ($17) leases instead
// of the counts: it applies when every vacant member fits in them, in
// the round's order (the store-wide lease's entries and bytes, the
// principal's lease's entries and bytes; the room asked where a bound
// applies, the record's size otherwise), and each lease was granted
// under the member's bounds; it then uses them up. Records are inserted
// in key order (two rounds inserting the same identities wait in one
// order) with seq from the sequence; an identity inserted meanwhile by
// another Store is left alone (ON CONFLICT), and that member's row then
// has neither a seq nor a record: the caller rolls the round back.
var reserveOwnSQL = roundMembersCTE + `sl AS (
	SELECT entries, bytes, lim_entries, lim_bytes FROM {leases} WHERE slot = $17::text AND kind = 0 AND principal = ''
), ok AS (
	SELECT (NOT EXISTS (SELECT 1 FROM v) OR txid_current_if_assigned() IS NOT NULL)
		AND NOT EXISTS (SELECT 1 FROM {records} r JOIN v ON r.execution_id = v.execution_id)
		AND NOT ` + heldReplacedSQL + `
		AND coalesce((SELECT bool_and(coalesce(sl.lim_entries = $14::bigint AND c.vrank <= sl.entries
				AND sl.lim_bytes = c.max_bytes AND c.sprev + CASE WHEN c.max_bytes > 0 THEN c.ask ELSE c.size END <= sl.bytes
				AND pl.lim_entries = c.quota AND c.prank <= pl.entries
				AND pl.lim_bytes = c.byte_quota AND c.pprev + CASE WHEN c.byte_quota > 0 THEN c.ask ELSE c.size END <= pl.bytes, false))
			FROM c LEFT JOIN sl ON true
			LEFT JOIN {leases} pl ON pl.slot = $17::text AND pl.kind = 1 AND pl.principal = c.principal), true) AS fits
), ins AS (
	INSERT INTO {records} (principal, session_id, request_id, execution_id, seq, tool, fingerprint, status, node_id, started_at)
	SELECT c.principal, c.session_id, c.request_id, c.execution_id, nextval('{seq}'), c.tool, c.fingerprint, 'running', c.node_id, c.started_at
	FROM c, ok WHERE ok.fits ORDER BY c.principal, c.session_id, c.request_id
	ON CONFLICT DO NOTHING
	RETURNING execution_id, seq, started_at
), ls AS (
	UPDATE {leases} SET entries = entries - (SELECT count(*) FROM v), bytes = bytes - (SELECT coalesce(sum(size), 0) FROM v)
	WHERE slot = $17::text AND kind = 0 AND principal = '' AND (SELECT fits FROM ok) AND EXISTS (SELECT 1 FROM v)
), pc AS (
	SELECT principal, count(*) AS n, sum(size) AS size FROM v GROUP BY principal
), lp AS (
	UPDATE {leases} AS l SET entries = l.entries - pc.n, bytes = l.bytes - pc.size
	FROM pc, ok WHERE ok.fits AND l.slot = $17::text AND l.kind = 1 AND l.principal = pc.principal
)
SELECT ok.fits, ins.seq, ins.started_at, ` + recordColumnsOf("h") + `
FROM ok CROSS JOIN i LEFT JOIN ins ON ins.execution_id = i.execution_id LEFT JOIN h ON h.n = i.n
ORDER BY i.n`

// completeOwnSQL is completeAllSQL against the slot's ($13) leases: it
// applies when every record is open under its execution and every
// outcome's bytes fit, with those before it, in the store-wide lease and
// the principal's, granted under the member's bounds; it then uses them
// up. An outcome that would not fit is decided under the meta row.
var completeOwnSQL = `WITH i AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[], $8::bytea[],
		$9::timestamptz[], $10::bigint[], $11::bigint[], $12::bigint[])
		WITH ORDINALITY AS i(principal, session_id, request_id, fingerprint, execution_id, status, data, error,
			finished_at, delta, byte_quota, max_bytes, n)
), c AS (
	SELECT i.*, sum(i.delta) OVER (PARTITION BY i.principal ORDER BY i.n) AS pcum, sum(i.delta) OVER (ORDER BY i.n) AS scum FROM i
), sl AS (
	SELECT bytes, lim_bytes FROM {leases} WHERE slot = $13::text AND kind = 0 AND principal = ''
), ok AS (
	SELECT (SELECT count(*) FROM {records} r JOIN i ON r.principal = i.principal AND r.session_id = i.session_id
			AND r.request_id = i.request_id AND r.fingerprint = i.fingerprint AND r.execution_id = i.execution_id
			AND r.status IN ('running', 'interrupted')) = (SELECT count(*) FROM i)
		AND coalesce((SELECT bool_and(c.delta <= 0 OR coalesce(sl.lim_bytes = c.max_bytes AND c.scum <= sl.bytes
				AND pl.lim_bytes = c.byte_quota AND c.pcum <= pl.bytes, false))
			FROM c LEFT JOIN sl ON true
			LEFT JOIN {leases} pl ON pl.slot = $13::text AND pl.kind = 1 AND pl.principal = c.principal), true) AS fits
), u AS (
	UPDATE {records} AS r SET status = i.status, data = i.data, error = i.error, finished_at = i.finished_at
	FROM i, ok
	WHERE ok.fits AND r.principal = i.principal AND r.session_id = i.session_id AND r.request_id = i.request_id
		AND r.fingerprint = i.fingerprint AND r.execution_id = i.execution_id AND r.status IN ('running', 'interrupted')
	RETURNING i.n, ` + recordColumnsOf("r") + `
), ls AS (
	UPDATE {leases} SET bytes = bytes - (SELECT sum(delta) FROM i)
	WHERE slot = $13::text AND kind = 0 AND principal = '' AND (SELECT fits FROM ok) AND (SELECT sum(delta) FROM i) > 0
), pc AS (
	SELECT principal, sum(delta) AS delta FROM i GROUP BY principal
), lp AS (
	UPDATE {leases} AS l SET bytes = l.bytes - pc.delta
	FROM pc, ok WHERE ok.fits AND pc.delta > 0 AND l.slot = $13::text AND l.kind = 1 AND l.principal = pc.principal
)
SELECT ok.fits, ` + recordColumnsOf("u") + ` FROM ok LEFT JOIN u ON true ORDER BY u.n`

// refillSQL grants the slot ($1) what its round needs and a share of the
// room left, or nothing: $2 and $3 the round's entries and bytes, $4 the
// capacity and $5 the bound on bytes the round applies; $6-$10 arrays,
// one element per principal of the round (principal, entries and bytes
// needed, quota, byte quota). A bound of -1 (noBound) leaves its
// dimension alone; 0 is no bound. A dimension is granted when its
// outstanding leases were granted under the same bound (or none are
// outstanding) and the count, leases included, leaves room for the need;
// every dimension or none. It returns whether it granted. It runs under
// the meta row, which every writer of the counts holds.
const refillSQL = `WITH pg AS (
	SELECT pi.*, coalesce(pr.entries, 0) AS ge, coalesce(pr.bytes, 0) AS gb, pr.lim_entries AS le, pr.lim_bytes AS lb
	FROM unnest($6::text[], $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[]) AS pi(principal, need_e, need_b, quota, byte_quota)
	LEFT JOIN {principals} pr ON pr.principal = pi.principal
), pgr AS (
	SELECT pg.*,
		pg.quota < 0 OR ((pg.le IS NULL OR pg.le = pg.quota) AND (pg.quota = 0 OR pg.ge + pg.need_e <= pg.quota)) AS ok_e,
		pg.byte_quota < 0 OR ((pg.lb IS NULL OR pg.lb = pg.byte_quota) AND (pg.byte_quota = 0 OR pg.gb + pg.need_b <= pg.byte_quota)) AS ok_b,
		CASE WHEN pg.quota < 0 THEN 0 WHEN pg.quota = 0 THEN pg.need_e + ` + leaseUnboundedEntriesSQL + `
			ELSE pg.need_e + greatest(least(` + leaseEntriesSQL + `, (pg.quota - pg.ge - pg.need_e) / 4), 0) END AS grant_e,
		CASE WHEN pg.byte_quota < 0 THEN 0 WHEN pg.byte_quota = 0 THEN pg.need_b + ` + leaseUnboundedBytesSQL + `
			ELSE pg.need_b + greatest(least(` + leaseBytesSQL + `, (pg.byte_quota - pg.gb - pg.need_b) / 4), 0) END AS grant_b
	FROM pg
), sg AS (
	SELECT ($4::bigint < 0 OR ((mt.lim_entries IS NULL OR mt.lim_entries = $4::bigint) AND ($4::bigint = 0 OR mt.entries + $2::bigint <= $4::bigint)))
		AND ($5::bigint < 0 OR ((mt.lim_bytes IS NULL OR mt.lim_bytes = $5::bigint) AND ($5::bigint = 0 OR mt.bytes + $3::bigint <= $5::bigint))) AS ok,
		CASE WHEN $4::bigint < 0 THEN 0 WHEN $4::bigint = 0 THEN $2::bigint + ` + leaseUnboundedEntriesSQL + `
			ELSE $2::bigint + greatest(least(` + leaseEntriesSQL + `, ($4::bigint - mt.entries - $2::bigint) / 4), 0) END AS grant_e,
		CASE WHEN $5::bigint < 0 THEN 0 WHEN $5::bigint = 0 THEN $3::bigint + ` + leaseUnboundedBytesSQL + `
			ELSE $3::bigint + greatest(least(` + leaseBytesSQL + `, ($5::bigint - mt.bytes - $3::bigint) / 4), 0) END AS grant_b
	FROM {meta} mt WHERE mt.singleton
), ok AS (
	SELECT sg.ok AND coalesce((SELECT bool_and(ok_e AND ok_b) FROM pgr), true) AS fits FROM sg
), gm AS (
	UPDATE {meta} AS mt SET entries = mt.entries + sg.grant_e, bytes = mt.bytes + sg.grant_b,
		lim_entries = CASE WHEN $4::bigint < 0 THEN mt.lim_entries ELSE $4::bigint END,
		lim_bytes = CASE WHEN $5::bigint < 0 THEN mt.lim_bytes ELSE $5::bigint END
	FROM sg, ok WHERE mt.singleton AND ok.fits
), gp AS (
	INSERT INTO {principals} AS pr (principal, entries, bytes, lim_entries, lim_bytes)
	SELECT pgr.principal, pgr.grant_e, pgr.grant_b, nullif(greatest(pgr.quota, -1), -1), nullif(greatest(pgr.byte_quota, -1), -1)
	FROM pgr, ok WHERE ok.fits
	ON CONFLICT (principal) DO UPDATE SET entries = pr.entries + excluded.entries, bytes = pr.bytes + excluded.bytes,
		lim_entries = coalesce(excluded.lim_entries, pr.lim_entries), lim_bytes = coalesce(excluded.lim_bytes, pr.lim_bytes)
), gl AS (
	INSERT INTO {leases} AS l (slot, kind, principal, entries, bytes, lim_entries, lim_bytes)
	SELECT $1::text, 0, '', sg.grant_e, sg.grant_b, nullif(greatest($4::bigint, -1), -1), nullif(greatest($5::bigint, -1), -1)
	FROM sg, ok WHERE ok.fits
	UNION ALL
	SELECT $1::text, 1, pgr.principal, pgr.grant_e, pgr.grant_b, nullif(greatest(pgr.quota, -1), -1), nullif(greatest(pgr.byte_quota, -1), -1)
	FROM pgr, ok WHERE ok.fits
	ON CONFLICT (slot, kind, principal) DO UPDATE SET entries = l.entries + excluded.entries, bytes = l.bytes + excluded.bytes,
		lim_entries = coalesce(excluded.lim_entries, l.lim_entries), lim_bytes = coalesce(excluded.lim_bytes, l.lim_bytes)
)
SELECT fits FROM ok`

// The most a refill grants beyond what its round needs, where a bound
// applies (and at most a quarter of the room left), and what it grants
// beyond the need where none does (a principal with no quota, no bound
// on bytes).
const (
	leaseEntriesSQL          = "512"
	leaseBytesSQL            = "4194304"
	leaseUnboundedEntriesSQL = "1048576"
	leaseUnboundedBytesSQL   = "1099511627776"
)

// foldSQL returns every lease to the counts, which are then the records'
// exactly, and clears the bounds they were granted under. It runs under
// the meta row, after lockAllLeases.
const foldSQL = `WITH d AS (
	DELETE FROM {leases} RETURNING kind, principal, entries, bytes
), m AS (
	UPDATE {meta} SET entries = entries - coalesce((SELECT sum(entries) FROM d WHERE kind = 0), 0),
		bytes = bytes - coalesce((SELECT sum(bytes) FROM d WHERE kind = 0), 0), lim_entries = NULL, lim_bytes = NULL
	WHERE singleton
)
UPDATE {principals} AS pr SET entries = pr.entries - coalesce((SELECT sum(d.entries) FROM d WHERE d.kind = 1 AND d.principal = pr.principal), 0),
	bytes = pr.bytes - coalesce((SELECT sum(d.bytes) FROM d WHERE d.kind = 1 AND d.principal = pr.principal), 0),
	lim_entries = NULL, lim_bytes = NULL
WHERE pr.lim_entries IS NOT NULL OR pr.lim_bytes IS NOT NULL OR pr.principal IN (SELECT principal FROM d WHERE kind = 1)`

// queueLockLeases adds lockLeasesSQL for a round.
func (s *Store) queueLockLeases(b *pgx.Batch, slot string, batch []*reservation, settles []*completion) {
	principal, session, request := make([]string, len(batch)), make([]string, len(batch)), make([]string, len(batch))
	seen := make(map[string]bool)
	var principals []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			principals = append(principals, p)
		}
	}
	for i, it := range batch {
		principal[i], session[i], request[i] = it.key.Principal, it.key.Session, it.key.RequestID
		add(it.key.Principal)
	}
	for _, c := range settles {
		add(c.key.Principal)
	}
	b.Queue(s.q.lockLeases, slot, principals, len(settles) > 0, principal, session, request)
}

// need is what a round asks of one principal's leases, and the bounds
// its members apply: its members' bytes, and the largest headroom of its
// reservations (reserveOwn checks each member's headroom above the bytes
// of those before it, and uses up only its record's size).
type need struct {
	entries, bytes   int64
	headroom         int64
	quota, byteQuota int64 // noBound: not asked
}

// queueRefill adds refillSQL for a round, and reports false (queuing
// nothing) when its members apply different bounds: the round is then
// decided under the meta row.
func (s *Store) queueRefill(b *pgx.Batch, slot string, batch []*reservation, settles []*completion) bool {
	var (
		entries, bytes int64
		headroom       int64
		maxBytes       int64 = noBound
		capacity       int64 = noBound
		order          []string
		needs          = make(map[string]*need)
	)
	bound := func(have *int64, v int64) bool {
		if *have == noBound || *have == v {
			*have = v
			return true
		}
		return false
	}
	of := func(p string) *need {
		n := needs[p]
		if n == nil {
			n = &need{quota: noBound, byteQuota: noBound}
			needs[p] = n
			order = append(order, p)
		}
		return n
	}
	for _, it := range batch {
		size := store.RecordSize(store.Record{Key: it.key, ExecutionID: it.exec.ID, Tool: it.exec.Tool, Fingerprint: it.fingerprint, NodeID: it.exec.NodeID})
		n := of(it.key.Principal)
		n.entries++
		n.bytes += size
		n.headroom = max(n.headroom, it.exec.Headroom)
		entries++
		bytes += size
		headroom = max(headroom, it.exec.Headroom)
		capacity = int64(s.cfg.Capacity)
		if !bound(&maxBytes, it.maxBytes) || !bound(&n.quota, int64(it.exec.Quota)) || !bound(&n.byteQuota, it.exec.ByteQuota) {
			return false
		}
	}
	for _, c := range settles {
		delta := store.OutcomeSize(c.res.Data, c.res.Error)
		if delta <= 0 {
			continue
		}
		n := of(c.key.Principal)
		n.bytes += delta
		bytes += delta
		if !bound(&maxBytes, c.maxBytes) || !bound(&n.byteQuota, c.res.ByteQuota) {
			return false
		}
	}
	k := len(order)
	principals, needE, needB, quota, byteQuota := make([]string, k), make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k)
	for i, p := range order {
		n := needs[p]
		principals[i], needE[i], needB[i], quota[i], byteQuota[i] = p, n.entries, n.bytes+n.headroom, n.quota, n.byteQuota
	}
	b.Queue(s.q.refill, slot, entries, bytes+headroom, capacity, maxBytes, principals, needE, needB, quota, byteQuota)
	return true
}

// closeFoldTimeout bounds the fold of Close.
const closeFoldTimeout = 2 * time.Second

// foldLeases returns every lease to the counts, in a transaction of its
// own under the meta row; an error leaves them to the next fold.
func (s *Store) foldLeases() {
	ctx, cancel := context.WithTimeout(context.Background(), closeFoldTimeout)
	defer cancel()
	_ = s.inTx(ctx, "fold", func(pgx.Tx) (bool, error) { return true, nil })
}
