package postgres

import (
	"context"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/carmyhq/carmy/store"
)

// List implements store.Store: newest first (by Seq), at most
// store.MaxListLimit records a page. The filters are the statement's WHERE
// clause, so the page is cut after them (store.ListQuery.Match says what
// each selects).
//
// Each combination of filters is its own statement (at most 48, each
// prepared once per connection). The indexes serve them: (principal,
// session_id, seq) one principal's session, (session_id, seq) a session of
// every principal, (principal, seq) every session of one principal, the
// partial index of the open records an attention listing, and the unique
// index on seq, scanned newest first, a listing of everything, and the
// partial index of the records awaiting approval a listing of those alone;
// a tool or a finished status is a filter on the rows those scans read.
func (s *Store) List(ctx context.Context, q store.ListQuery) (store.Page, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = store.DefaultListLimit
	}
	limit = min(limit, store.MaxListLimit)
	sql, args, ok := s.listStatement(q, limit)
	if !ok {
		return store.Page{}, nil
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return store.Page{}, readErr("list", err)
	}
	recs, err := pgx.CollectRows(rows, scanRecord)
	if err != nil {
		return store.Page{}, readErr("list", err)
	}
	var p store.Page
	if len(recs) > limit {
		recs = recs[:limit]
		p.Next = recs[limit-1].Seq
	}
	p.Records = recs
	return p, nil
}

// listStatement returns the statement and arguments of q, asking for one
// record more than limit (it tells whether another page follows). ok is
// false when q cannot select anything: text PostgreSQL would refuse (not
// UTF-8, or with a NUL) is held by no record.
func (s *Store) listStatement(q store.ListQuery, limit int) (sql string, args []any, ok bool) {
	before := int64(math.MaxInt64)
	if q.Before != 0 && q.Before < math.MaxInt64 {
		before = int64(q.Before)
	}
	var where strings.Builder
	where.WriteString(`seq < $1`)
	args = append(args, before)
	add := func(clause string, arg any) {
		args = append(args, arg)
		where.WriteString(" AND ")
		where.WriteString(strings.ReplaceAll(clause, "$?", "$"+strconv.Itoa(len(args))))
	}
	if !q.AllPrincipals {
		if !validText(q.Principal) {
			return "", nil, false
		}
		add(`principal = $?`, q.Principal)
	}
	if !q.AllSessions {
		if !validText(q.Session) {
			return "", nil, false
		}
		add(`session_id = $?`, q.Session)
	}
	if q.Tool != "" {
		if !validText(q.Tool) {
			return "", nil, false
		}
		add(`tool = $?`, q.Tool)
	}
	if len(q.Statuses) > 0 {
		statuses := make([]string, 0, len(q.Statuses))
		for _, st := range q.Statuses {
			if st.Valid() {
				statuses = append(statuses, string(st))
			}
		}
		switch {
		case len(statuses) == 0:
			return "", nil, false
		case len(statuses) == 1 && statuses[0] == string(store.StatusAwaitingApproval):
			// The records awaiting a decision (the expiry's listing): the
			// predicate of their partial index, as it is written there.
			where.WriteString(` AND status = 'awaiting_approval'`)
		default:
			add(`status = ANY($?::text[])`, statuses)
		}
	}
	if q.Attention {
		gone := make([]string, 0, len(q.GoneNodes))
		for _, n := range q.GoneNodes {
			if validText(n) {
				gone = append(gone, n)
			}
		}
		// The first conjunct is the predicate of the open records'
		// index, written as it is there so that the planner uses it.
		add(`status IN ('running', 'interrupted') AND (status = 'interrupted' OR node_id = ANY($?::text[]))`, gone)
	}
	args = append(args, limit+1)
	sql = s.names.expand(`SELECT ` + recordColumns + ` FROM {records} WHERE ` + where.String() +
		` ORDER BY seq DESC LIMIT $` + strconv.Itoa(len(args)))
	return sql, args, true
}

// RunningNodes implements store.RunningNodeLister.
func (s *Store) RunningNodes(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, s.q.runningNodes)
	if err != nil {
		return nil, readErr("running nodes", err)
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, readErr("running nodes", err)
	}
	return nodes, nil
}
