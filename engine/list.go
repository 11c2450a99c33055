package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/carmyhq/carmy/store"
)

// ListRequest is what a caller asks of List (docs/api.md#executions and docs/console.md). The
// filters combine by AND and are applied by the store before the page is
// cut.
type ListRequest struct {
	// Session selects one session ("" is a session too), unless
	// AllSessions selects every session the caller may see.
	Session     string
	AllSessions bool
	// Principal, when not "", keeps only that principal's records. An
	// admin may name any principal; another caller only its own (a
	// no-op), else List answers ErrPrincipalForbidden: a filter never
	// widens a caller's view.
	Principal string
	// Statuses, when not empty, keeps only records of those statuses;
	// a status that is not store.Status.Valid is INVALID_REQUEST.
	Statuses []store.Status
	// Tool, when not "", keeps only the records of that tool.
	Tool string
	// Attention keeps only the records that need a person: the
	// interrupted ones, and the running ones whose runner is gone (the
	// test Resolve applies).
	Attention bool
	// Approvals lists instead the records awaiting approval that the
	// caller may see or decide on (listApprovals): Session, AllSessions,
	// Principal, Statuses and Attention are then ignored.
	Approvals bool
	// Limit is the page size, 0 for store.DefaultListLimit; Before is the
	// Next of the previous page, 0 for the first.
	Limit  int
	Before uint64
}

// ErrPrincipalForbidden answers a listing of another principal's records
// by a caller that is not an admin.
var ErrPrincipalForbidden = store.NewError(store.CodeForbidden, "a token sees only its own principal's executions")

// List returns a page of the records the caller may see that req selects,
// newest first: its own (any principal's for an admin, or the one
// req.Principal names), of the tools it may call. A page may hold fewer
// than Limit records when some were of tools outside Caller.Tools, which
// are dropped after the store's page is cut.
//
// With Attention, the backend is first asked which nodes hold running
// records (Backend.RunningNodes), and each is tested as Resolve tests
// a record's runner; the gone ones travel in the query, so that the
// store filters, and pages, by them. With a backend of one process, or
// one that cannot name those nodes (Basic), no other node's runner is
// known to be gone and only interrupted records need attention. A running record of
// this node is its own execution and is not listed.
func (r *Runtime) List(ctx context.Context, caller Caller, req ListRequest) (store.Page, error) {
	if req.Approvals {
		return r.listApprovals(ctx, caller, req)
	}
	q, err := r.listQuery(ctx, caller, req)
	if err != nil {
		return store.Page{}, err
	}
	if req.Tool != "" && !caller.MayCall(req.Tool) {
		return store.Page{}, nil // every record it selects would be dropped
	}
	page, err := r.Store().List(ctx, q)
	if err != nil || caller.Tools == nil {
		return page, err
	}
	page.Records = slices.DeleteFunc(page.Records, func(rec store.Record) bool { return !caller.MayCall(rec.Tool) })
	return page, nil
}

// listQuery checks req against the caller and turns it into the store's
// query.
func (r *Runtime) listQuery(ctx context.Context, caller Caller, req ListRequest) (store.ListQuery, error) {
	if !req.AllSessions {
		if err := checkSessionID(req.Session); err != nil {
			return store.ListQuery{}, err
		}
	}
	if req.Limit < 0 || req.Limit > store.MaxListLimit {
		return store.ListQuery{}, invalid("limit", "must be 1-%d", store.MaxListLimit)
	}
	for _, st := range req.Statuses {
		if !st.Valid() {
			return store.ListQuery{}, invalid("status", "unknown status %q: one of running, interrupted, completed, failed, timed_out, cancelled", string(st))
		}
	}
	q := store.ListQuery{
		Principal: caller.Principal, AllPrincipals: caller.Admin,
		Session: req.Session, AllSessions: req.AllSessions,
		Statuses: req.Statuses, Tool: req.Tool, Attention: req.Attention,
		Limit: req.Limit, Before: req.Before,
	}
	if req.Principal != "" {
		if !caller.Admin && req.Principal != caller.Principal {
			return store.ListQuery{}, ErrPrincipalForbidden
		}
		q.Principal, q.AllPrincipals = req.Principal, false
	}
	if req.Attention {
		gone, err := r.goneNodes(ctx)
		if err != nil {
			return store.ListQuery{}, err
		}
		q.GoneNodes = gone
	}
	return q, nil
}

// goneNodes returns the nodes that hold running records and whose runner
// is gone (nodeGone): what an attention listing passes to the store.
func (r *Runtime) goneNodes(ctx context.Context) ([]string, error) {
	b := r.Store()
	nodes, err := b.RunningNodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("list: the nodes of running executions: %w", err)
	}
	return slices.DeleteFunc(nodes, func(n string) bool { return !r.nodeGone(b, n) }), nil
}
