package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/tests/robustness/ledgerapi"
)

// settleTimeout bounds how long the checks wait for executions to finish
// and replicas to converge once the faults are healed.
const settleTimeout = 60 * time.Second

// finalRecord is an identity's record once the run settled.
type finalRecord struct {
	found bool
	rec   client.Execution
}

// settle reads every identity's record until none is running,
// interrupted or awaiting approval (a tool outlives its 2 s timeout by
// nothing; a dead runner's executions become interrupted, and the tool's
// reconcile probe settles those within seconds; a gate the approver left
// undecided expires 15 s after its call). What is still running at the deadline is an
// anomaly: running without a live runner; what is still interrupted is one
// too: the probe, which the ledger always answers, did not settle it.
func (c *testCluster) settle(ctx context.Context, keys []string) (map[string]finalRecord, []string) {
	out := map[string]finalRecord{}
	deadline := time.Now().Add(settleTimeout)
	pending := slices.Clone(keys)
	for len(pending) > 0 {
		var next []string
		for _, key := range pending {
			fr, err := c.readRecord(ctx, key)
			if err != nil || fr.found && (fr.rec.Status == statusRunning || fr.rec.Status == statusInterrupted || fr.rec.Status == statusAwaiting) {
				next = append(next, key)
				out[key] = fr
				continue
			}
			out[key] = fr
		}
		pending = next
		if len(pending) == 0 || time.Now().After(deadline) || !sleep(ctx, 500*time.Millisecond) {
			break
		}
	}
	var anomalies []string
	for _, key := range pending {
		fr := out[key]
		why := "running without a live runner"
		switch fr.rec.Status {
		case statusInterrupted:
			why = "no reconcile probe settled it"
		case statusAwaiting:
			why = "its gate neither decided nor expired"
		}
		anomalies = append(anomalies, fmt.Sprintf("%s: still %q (execution %s on %s) %s after the faults healed: %s",
			key, fr.rec.Status, fr.rec.ExecutionID, fr.rec.NodeID, settleTimeout, why))
	}
	return out, anomalies
}

// readRecord reads key's record from any node that answers.
func (c *testCluster) readRecord(ctx context.Context, key string) (finalRecord, error) {
	var last error
	for _, url := range sortedPairs(c.urls()) {
		r, found, err := c.nc.lookup(ctx, url, key)
		if err == nil {
			return finalRecord{found: found, rec: r}, nil
		}
		last = err
	}
	return finalRecord{}, fmt.Errorf("no node answered for %s: %v", key, last)
}

// converge waits until every node reports the same applied index and
// state hash twice in a row, and returns the digest.
func (c *testCluster) converge(ctx context.Context) (digest, error) {
	deadline := time.Now().Add(settleTimeout)
	var prev digest
	var last error
	for {
		d, err := c.sameDigest(ctx)
		switch {
		case err != nil:
			last = err
		case d == prev:
			return d, nil
		default:
			prev, last = d, fmt.Errorf("digest moved: %+v", d)
		}
		if time.Now().After(deadline) {
			return d, fmt.Errorf("replicas did not converge within %s: %w", settleTimeout, last)
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return d, ctx.Err()
		}
	}
}

func (c *testCluster) sameDigest(ctx context.Context) (digest, error) {
	var first digest
	for i, name := range c.names {
		n := c.node(name)
		if n == nil || n.URL() == "" {
			return first, fmt.Errorf("%s not reachable", name)
		}
		d, err := c.nc.digest(ctx, n.URL())
		if err != nil {
			return first, fmt.Errorf("%s: %w", name, err)
		}
		if i == 0 {
			first = d
		} else if d.AppliedIndex != first.AppliedIndex || d.Hash != first.Hash {
			return first, fmt.Errorf("%s at index %d hash %.12s, %s at index %d hash %.12s",
				c.names[0], first.AppliedIndex, first.Hash, name, d.AppliedIndex, d.Hash)
		}
	}
	return first, nil
}

// ledgerEntries reads the ledger.
func (c *testCluster) ledgerEntries(ctx context.Context) ([]ledgerapi.Entry, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.ledger.URL()+"/entries", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.nc.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the ledger: %w", err)
	}
	defer resp.Body.Close()
	var out []ledgerapi.Entry
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("reading the ledger: %w", err)
	}
	return out, nil
}

// checkLedger checks the ledger against the answers and the final
// records: at most one execution per identity; every completed answer has
// exactly that execution's entry; every execution that ran is the one its
// identity's record names.
func checkLedger(entries []ledgerapi.Entry, done []completedAnswer, final map[string]finalRecord) []string {
	var anomalies []string
	byKey := map[string][]ledgerapi.Entry{}
	for _, e := range entries {
		byKey[e.RequestID] = append(byKey[e.RequestID], e)
	}
	for key, es := range sortedPairs(byKey) {
		if len(es) > 1 {
			anomalies = append(anomalies, fmt.Sprintf("%s: executed %d times: %+v", key, len(es), es))
		}
		fr, known := final[key]
		switch {
		case !known:
			anomalies = append(anomalies, fmt.Sprintf("%s: on the ledger but never called: %+v", key, es))
		case !fr.found:
			anomalies = append(anomalies, fmt.Sprintf("%s: executed (%s) but no record remains", key, es[0].ExecutionID))
		case fr.rec.ExecutionID != es[0].ExecutionID:
			anomalies = append(anomalies, fmt.Sprintf("%s: executed as %s but the record names %s (%s)", key, es[0].ExecutionID, fr.rec.ExecutionID, fr.rec.Status))
		}
	}
	for _, a := range done {
		es := byKey[a.key]
		switch {
		case len(es) != 1:
			anomalies = append(anomalies, fmt.Sprintf("%s: completed answer from %s (execution %s) with %d ledger entries", a.key, a.node, a.executionID, len(es)))
		case es[0].ExecutionID != a.executionID:
			anomalies = append(anomalies, fmt.Sprintf("%s: completed answer names execution %s, the ledger %s", a.key, a.executionID, es[0].ExecutionID))
		case !a.hasData || a.data.Seq != es[0].Seq || a.data.Value != es[0].Value:
			anomalies = append(anomalies, fmt.Sprintf("%s: completed answer carries %+v, the ledger entry is %+v", a.key, a.data, es[0]))
		}
	}
	return anomalies
}

// checkReplays checks that every 200 answer of an identity names the same
// execution and carries the same result, over either transport, and that
// its HTTP answers, which carry the record's timestamps, carry the same.
func checkReplays(ops []Op) []string {
	var anomalies []string
	first, firstStamped := map[string]Op{}, map[string]Op{}
	for _, op := range ops {
		if op.Kind != KindOK {
			continue
		}
		if op.Stamps != "" {
			if f, seen := firstStamped[op.Key]; !seen {
				firstStamped[op.Key] = op
			} else if f.Stamps != op.Stamps {
				anomalies = append(anomalies, fmt.Sprintf("%s: %s answered %s with timestamps %s, %s answered %s with %s",
					op.Key, f.Node, f.ExecutionID, f.Stamps, op.Node, op.ExecutionID, op.Stamps))
			}
		}
		f, seen := first[op.Key]
		if !seen {
			first[op.Key] = op
			continue
		}
		if f.ExecutionID != op.ExecutionID || f.Result != op.Result {
			anomalies = append(anomalies, fmt.Sprintf("%s: %s (%s) answered %s %q, %s (%s) answered %s %q",
				op.Key, f.Node, f.Transport, f.ExecutionID, f.Result, op.Node, op.Transport, op.ExecutionID, op.Result))
		}
	}
	return anomalies
}
