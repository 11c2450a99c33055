package robustness

import (
	"fmt"
	"net/http"

	"github.com/carmyhq/carmy/tests/robustness/ledgerapi"
)

// gateStats sums up the gated calls of a run and the approver's decisions.
type gateStats struct {
	Calls      int // calls of the gated tool (every attempt)
	Identities int // identities of the gated tool
	Awaiting   int // of the calls: answered awaiting_approval (202 or APPROVAL_PENDING)

	Learned   int // executions the approver read in its queue
	Ignored   int // of them: left undecided, to expire
	Approved  int // approvals answered with the record (200 or 202), or EXECUTION_UNCERTAIN
	Uncertain int // of them: EXECUTION_UNCERTAIN, the approved run's answer lost (interrupted)
	Denied    int // denials answered with the record (200)
	Already   int // decisions answered 409 INVALID_STATE: decided already (an earlier attempt, or the expiry)
	Gone      int // decisions answered 404: the execution was released (a reconcile probe) after an approval
	Released  int // approvals answered running or interrupted whose execution a probe released after, nothing on the ledger
	Retried   int // decision requests answered 503 or not at all, then sent again

	// Final statuses of the gated identities' records, and how many of
	// those identities ran on the ledger.
	Final map[string]int
	Ran   int
}

// checkGated checks the gated identities and the approver's decisions
// against the final records and the ledger (checkLedger holds every
// identity, gated ones too, to at most one execution):
//   - a gated identity denied or expired never ran: no ledger entry;
//   - one completed ran exactly once, as the execution its record names;
//   - a decision answered with the record left that execution as the
//     answer said: a final status is the identity's final record; an
//     approval's running (or interrupted) execution is never denied or
//     expired after;
//   - every decision the approver sent was answered, within the contract.
//
// It returns the approvals answered completed, for checkLedger to hold
// against the ledger as the workload's completed answers.
func checkGated(ops []Op, decisions []decision, final map[string]finalRecord, entries []ledgerapi.Entry) (gateStats, []completedAnswer, []string) {
	var anomalies []string
	st := gateStats{Final: map[string]int{}}
	byKey := map[string][]ledgerapi.Entry{}
	for _, e := range entries {
		byKey[e.RequestID] = append(byKey[e.RequestID], e)
	}
	gated := map[string]bool{}
	for _, op := range ops {
		if !op.Gated {
			continue
		}
		st.Calls++
		gated[op.Key] = true
		if op.Kind == KindAwaiting {
			st.Awaiting++
		}
	}
	st.Identities = len(gated)
	for key := range sortedPairs(gated) {
		fr := final[key]
		es := byKey[key]
		if len(es) > 0 {
			st.Ran++
		}
		if !fr.found {
			st.Final["none"]++
			continue
		}
		status := string(fr.rec.Status)
		st.Final[status]++
		switch {
		case gateStatuses[status] && len(es) > 0:
			anomalies = append(anomalies, fmt.Sprintf("%s: %s (execution %s), yet the tool ran: %+v", key, status, fr.rec.ExecutionID, es))
		case status == "completed" && (len(es) != 1 || es[0].ExecutionID != fr.rec.ExecutionID):
			anomalies = append(anomalies, fmt.Sprintf("%s: gated, completed as %s, with ledger entries %+v", key, fr.rec.ExecutionID, es))
		}
	}

	var done []completedAnswer
	for _, d := range decisions {
		st.Learned++
		st.Retried += d.Retried
		where := fmt.Sprintf("%s: %s of %s on %s", d.Key, d.Choice, d.ExecutionID, d.Node)
		switch {
		case d.Choice == choiceIgnore:
			st.Ignored++
			continue
		case d.Detail != "":
			anomalies = append(anomalies, where+": "+d.Detail)
			continue
		case !d.settled():
			anomalies = append(anomalies, fmt.Sprintf("%s: no answer but 503 or none in %d attempts over %s", where, d.Attempts, decisionFor))
			continue
		case d.Code == codeUncertain:
			st.Approved++
			st.Uncertain++
		case d.HTTPStatus == http.StatusConflict:
			st.Already++
			continue
		case d.HTTPStatus == http.StatusNotFound:
			st.Gone++
			continue
		case d.Choice == choiceApprove:
			st.Approved++
		default:
			st.Denied++
		}
		fr := final[d.Key]
		switch {
		case !fr.found && (d.Status == statusRunning || d.Status == statusInterrupted) && len(byKey[d.Key]) == 0:
			// The approved run's answer was lost and a reconcile probe,
			// finding no trace of it on the ledger, released the
			// execution: the identity is free again and nothing ran.
			st.Released++
		case !fr.found:
			anomalies = append(anomalies, fmt.Sprintf("%s: answered %s, but the identity has no record", where, d.Status))
		case d.Status == statusRunning || d.Status == statusInterrupted:
			if fr.rec.ExecutionID == d.ExecutionID && (gateStatuses[string(fr.rec.Status)] || fr.rec.Status == statusAwaiting) {
				anomalies = append(anomalies, fmt.Sprintf("%s: answered %s, yet the record is %s", where, d.Status, fr.rec.Status))
			}
		case fr.rec.ExecutionID != d.ExecutionID || string(fr.rec.Status) != d.Status:
			anomalies = append(anomalies, fmt.Sprintf("%s: answered %s, but the identity's record is %s %s", where, d.Status, fr.rec.ExecutionID, fr.rec.Status))
		}
		if d.Status == "completed" {
			done = append(done, completedAnswer{key: d.Key, executionID: d.ExecutionID, node: d.Node + " (approval)", data: d.data, hasData: d.hasData})
		}
	}
	return st, done, anomalies
}
