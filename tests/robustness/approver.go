package robustness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/carmyhq/carmy/tests/robustness/ledgerapi"
)

// The approver is the person of docs/policy.md#approval-gates: a client of
// its own, as the principal "approver", that reads the approval queue
// (GET /v1/executions?approvals=true) on a random node, and decides each
// execution it learns of after a short random delay, on a random node,
// through the faults: it approves most, denies some, and leaves a few
// undecided (they expire). A decision that got no answer, or 503, is sent
// again (to a random node) until it is answered; a 409 INVALID_STATE
// means decided already (an earlier attempt, or the expiry): settled.

// Shares of the approver's choices, in percent (the rest: approve).
const (
	pctDeny   = 10 // deny
	pctIgnore = 8  // decide nothing: the gate expires
)

// Timing of the approver.
const (
	queuePoll       = 300 * time.Millisecond // between two reads of the queue
	maxThink        = 2 * time.Second        // a decision waits up to this after the execution is learned of
	decisionFor     = 45 * time.Second       // a decision is retried for this long at most (the gate expires after 15 s)
	approverDrain   = 30 * time.Second       // after the run: how long the approver may take to decide what is left
	decisionBackoff = 250 * time.Millisecond // first backoff of a decision's retries
)

// Choices of the approver.
const (
	choiceApprove = "approve"
	choiceDeny    = "deny"
	choiceIgnore  = "ignore"
)

// decision is what became of one execution the approver learned of.
type decision struct {
	ExecutionID string
	Key         string // the identity's request_id
	Choice      string // choiceApprove, choiceDeny or choiceIgnore
	// Answer is the last attempt's: HTTP status (0: none), the record's
	// status (or INVALID_STATE's), the error code.
	HTTPStatus int
	Status     string
	Code       string
	Node       string
	Attempts   int    // requests sent (ignored: 0)
	Retried    int    // of them: answered 503 or not at all, so sent again
	Detail     string // what was outside the contract, for anomalies
	data       ledgerapi.Result
	hasData    bool
}

// settled reports whether the decision got a settling answer: the record
// as the decision left it (200 or 202), decided already (409), or gone
// (404: released by a reconcile probe after an approval).
func (d decision) settled() bool {
	switch d.HTTPStatus {
	case http.StatusOK, http.StatusAccepted, http.StatusConflict, http.StatusNotFound:
		return true
	}
	return false
}

// approver is the approving client.
type approver struct {
	nc    *nodeClient
	nodes endpoints
	rng   *rand.Rand // the queue reader's

	mu        sync.Mutex
	seen      map[string]bool // executions learned of
	decisions []decision
	reads     int // answered reads of the queue
	wg        sync.WaitGroup
}

func newApprover(seed uint64, nc *nodeClient, nodes endpoints) *approver {
	return &approver{nc: nc, nodes: nodes, rng: rand.New(rand.NewPCG(seed, 0xa9)), seen: map[string]bool{}}
}

// run reads the queue every queuePoll until ctx ends, deciding what it
// learns of in the background (which outlives ctx: drain waits for it).
func (a *approver) run(ctx context.Context) {
	for ctx.Err() == nil {
		a.poll()
		if !sleep(ctx, queuePoll) {
			return
		}
	}
}

// drain decides what is left once the workload stopped: it reads the
// queue until a read finds nothing it has not decided or chosen to
// ignore and no decision is in flight, within timeout. It returns an
// error when that never happened.
func (a *approver) drain(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		fresh, err := a.poll()
		if err == nil && fresh == 0 {
			a.wg.Wait()
			if fresh, err = a.poll(); err == nil && fresh == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			a.wg.Wait()
			return fmt.Errorf("the approver did not empty its queue within %s (last: %d new, %v)", timeout, fresh, err)
		}
		time.Sleep(queuePoll)
	}
}

// poll reads the queue once, on a random node, and starts deciding every
// execution not seen before; it returns how many those were.
func (a *approver) poll() (int, error) {
	a.mu.Lock()
	_, base := pickNodeOf(a.nodes, a.rng)
	seed := a.rng.Uint64()
	a.mu.Unlock()
	if base == "" {
		return 0, errors.New("no node reachable")
	}
	pending, err := a.nc.approvalQueue(context.Background(), base)
	if err != nil {
		return 0, err
	}
	fresh := 0
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reads++
	for _, p := range pending {
		if a.seen[p.ExecutionID] {
			continue
		}
		a.seen[p.ExecutionID] = true
		fresh++
		rng := rand.New(rand.NewPCG(seed, uint64(fresh)))
		a.wg.Go(func() { a.decide(rng, p) })
	}
	return fresh, nil
}

// decide takes one decision, after a random delay, retrying it as its
// doc says, and records it.
func (a *approver) decide(rng *rand.Rand, p queued) {
	d := decision{ExecutionID: p.ExecutionID, Key: p.RequestID, Choice: choiceApprove}
	switch n := rng.IntN(100); {
	case n < pctIgnore:
		d.Choice = choiceIgnore
	case n < pctIgnore+pctDeny:
		d.Choice = choiceDeny
	}
	if d.Choice != choiceIgnore {
		time.Sleep(time.Duration(rng.Int64N(int64(maxThink))))
		backoff := decisionBackoff
		for start := time.Now(); time.Since(start) < decisionFor; {
			node, base := pickNodeOf(a.nodes, rng)
			if base != "" {
				d.Node = node
				d.Attempts++
				a.nc.decide(context.Background(), base, d.Choice, &d)
				if d.settled() || d.Detail != "" {
					break
				}
				d.Retried++
			}
			time.Sleep(backoff + time.Duration(rng.Int64N(int64(backoff))))
			backoff = min(2*backoff, 2*time.Second)
		}
	}
	a.mu.Lock()
	a.decisions = append(a.decisions, d)
	a.mu.Unlock()
}

// results returns the decisions taken so far and the answered reads of
// the queue.
func (a *approver) results() ([]decision, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]decision(nil), a.decisions...), a.reads
}

// queued is an execution of the approval queue.
type queued struct {
	ExecutionID string `json:"execution_id"`
	RequestID   string `json:"request_id"`
	Status      string `json:"status"`
	Tool        string `json:"tool"`
	Principal   string `json:"principal"`
}

// approvalQueue reads every page of the node's approval queue as the
// approver (GET /v1/executions?approvals=true).
func (c *nodeClient) approvalQueue(ctx context.Context, baseURL string) ([]queued, error) {
	var out []queued
	cursor := ""
	for {
		q := url.Values{"approvals": {"true"}, "limit": {"100"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Executions []queued `json:"executions"`
			NextCursor string   `json:"next_cursor"`
		}
		status, raw, err := c.asApprover(ctx, http.MethodGet, baseURL+"/v1/executions?"+q.Encode())
		if err != nil {
			return nil, err
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("the approval queue: HTTP %d %.200s", status, raw)
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("the approval queue: %w", err)
		}
		out = append(out, page.Executions...)
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// decide sends one decision (choice: approve or deny) on d's execution to
// the node at baseURL as the approver, and puts the answer in d: the
// record as the decision left it (200, or 202 while an approved tool
// runs), 409 INVALID_STATE with the status it stands in, an approval's
// 409 EXECUTION_UNCERTAIN naming the execution interrupted (its run's
// answer lost, as a call's may be), 404, 503, or no answer (HTTPStatus
// 0). An answer outside the contract sets d.Detail.
func (c *nodeClient) decide(ctx context.Context, baseURL, choice string, d *decision) {
	d.HTTPStatus, d.Status, d.Code, d.hasData = 0, "", "", false
	status, raw, err := c.asApprover(ctx, http.MethodPost, baseURL+"/v1/executions/"+url.PathEscape(d.ExecutionID)+"/"+choice)
	if err != nil {
		return // no answer: it may or may not have been taken
	}
	d.HTTPStatus = status
	switch status {
	case http.StatusOK, http.StatusAccepted:
		var rec struct {
			ExecutionID string          `json:"execution_id"`
			Status      string          `json:"status"`
			Data        json.RawMessage `json:"data"`
		}
		if json.Unmarshal(raw, &rec) != nil || rec.ExecutionID != d.ExecutionID || !decisionStatus(choice, status, rec.Status) {
			d.Detail = fmt.Sprintf("%s answered HTTP %d: %.300s", choice, status, raw)
			return
		}
		d.Status = rec.Status
		if rec.Status == "completed" && json.Unmarshal(rec.Data, &d.data) == nil {
			d.hasData = true
		}
	case http.StatusConflict, http.StatusNotFound, http.StatusServiceUnavailable:
		var e errorBody
		want := map[int]string{http.StatusConflict: "INVALID_STATE", http.StatusNotFound: "NOT_FOUND", http.StatusServiceUnavailable: "UNAVAILABLE"}[status]
		err := json.Unmarshal(raw, &e)
		if err == nil && choice == choiceApprove && approvedUncertain(e) {
			// The approval committed and the tool started, through the
			// path of any call: its answer was lost (the execution is
			// interrupted, for the reconcile probe to settle).
			want = codeUncertain
		}
		if err != nil || e.Error.Code != want {
			d.Detail = fmt.Sprintf("%s answered HTTP %d: %.300s", choice, status, raw)
			return
		}
		d.Code, d.Status = e.Error.Code, e.Error.Status
	default:
		d.Detail = fmt.Sprintf("%s answered HTTP %d: %.300s", choice, status, raw)
	}
}

// decisionStatus reports whether a record's status fits the answer of a
// decision: an approval leaves the execution running (202) or finished
// (200), or expired (decided at or after expires_at), never denied; a
// denial leaves it denied or expired.
func decisionStatus(choice string, httpStatus int, status string) bool {
	if httpStatus == http.StatusAccepted {
		return choice == choiceApprove && status == statusRunning
	}
	if choice == choiceDeny {
		return status == statusDenied || status == statusExpired
	}
	return finalStatuses[status] || status == statusExpired
}

// codeUncertain is EXECUTION_UNCERTAIN's code.
const codeUncertain = "EXECUTION_UNCERTAIN"

// approvedUncertain reports whether e is the EXECUTION_UNCERTAIN an
// approval is answered when its run's outcome is unknown.
func approvedUncertain(e errorBody) bool {
	return e.Error.Code == codeUncertain && (e.Error.Status == statusInterrupted || e.Error.Status == statusRunning)
}

// asApprover makes one request with the approver's token and returns the
// answer's status and body (err: no answer).
func (c *nodeClient) asApprover(ctx context.Context, method, u string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(nil))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.tokens.Approver)
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, raw, nil
}
