package engine

import (
	"context"
	"slices"

	"github.com/carmyhq/carmy/store"
)

// approves reports whether c is among the approvers of rec, a record that
// still awaits a decision, and not its principal: List with Approvals
// shows such a caller the record, though it is another principal's, so
// that it sees what it is asked to decide. (Nothing else widens with it:
// Execution, and so cancel and resolve, still see only maySee's records.)
func (c Caller) approves(rec store.Record) bool {
	return rec.Status.Awaiting() && rec.Approval != nil && rec.Key.Principal != c.Principal &&
		slices.Contains(rec.Approval.Approvers, c.Principal)
}

// listApprovals serves List with req.Approvals: the records awaiting
// approval, of every session and principal, that caller may see (its
// own; every one for an admin) or decide on as an approver, newest first.
// Only Tool, Limit and Before apply. The store's page is cut before the
// records the caller may not read are dropped, so a page may hold fewer
// than Limit records; Next still pages on.
func (r *Runtime) listApprovals(ctx context.Context, caller Caller, req ListRequest) (store.Page, error) {
	if req.Limit < 0 || req.Limit > store.MaxListLimit {
		return store.Page{}, invalid("limit", "must be 1-%d", store.MaxListLimit)
	}
	q := store.ListQuery{
		AllPrincipals: true, AllSessions: true, Statuses: []store.Status{store.StatusAwaitingApproval},
		Tool: req.Tool, Limit: req.Limit, Before: req.Before,
	}
	page, err := r.Store().List(ctx, q)
	if err != nil {
		return page, err
	}
	page.Records = slices.DeleteFunc(page.Records, func(rec store.Record) bool {
		return !caller.maySee(rec) && !caller.approves(rec)
	})
	return page, nil
}
