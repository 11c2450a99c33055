package mcp

import (
	"time"

	"github.com/carmyhq/carmy/store"
)

// awaitingMessage is the statusMessage of a task whose execution awaits
// approval (docs/mcp.md#approval-gates-and-tasks): it names the
// execution_id, says that an approver must decide and how, and by when.
// The client has nothing to answer: it keeps polling (or waits on
// tasks/result), and the task goes on to working, then to its result;
// a denial or an expiry ends it with APPROVAL_DENIED or APPROVAL_EXPIRED.
func awaitingMessage(rec store.Record) string {
	msg := "awaiting approval: execution " + rec.ExecutionID + " runs only once an approver decides " +
		"(POST /v1/executions/" + rec.ExecutionID + "/approve or /deny, or the console's approval queue)"
	if rec.Approval != nil && !rec.Approval.ExpiresAt.IsZero() {
		msg += "; undecided at " + rec.Approval.ExpiresAt.UTC().Format(time.RFC3339) + " it expires"
	}
	return msg + ". Keep polling this task: it then runs and completes, or ends with APPROVAL_DENIED or APPROVAL_EXPIRED."
}
