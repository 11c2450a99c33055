package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/carmyhq/carmy/tests/robustness/ledgerapi"
)

// The ledger tool has a reconcile probe (docs/config.md#reconcile-probes, deploy/docker/test/
// carmy.yaml): the leader asks the ledger about every interrupted
// execution, by its idempotency key, and resolves it completed with the
// ledger's entry (200) or releases it (404). The ledger keeps every probe
// it answered; checkProbes holds Carmy's resolutions against them.

// resolvedByProbe is a record's resolved_by when a probe settled it.
const resolvedByProbe = "probe"

// probeStats sums up the probes of a run.
type probeStats struct {
	Asked      int // probes the ledger answered
	Executions int // distinct executions asked about: the interrupted ones the probe reached
	Completed  int // records resolved completed by a probe
	Released   int // executions the ledger answered 404 for that are no longer their identity's record
	RanAgain   int // of the released ones: identities whose tool a later retry ran
}

// ledgerProbes reads the probes the ledger answered.
func (c *testCluster) ledgerProbes(ctx context.Context) ([]ledgerapi.Probe, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.ledger.URL()+"/probes", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.nc.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the ledger's probes: %w", err)
	}
	defer resp.Body.Close()
	var out []ledgerapi.Probe
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("reading the ledger's probes: %w", err)
	}
	return out, nil
}

// checkProbes checks the resolutions of the reconcile probes against the
// ledger (entries and the probes it answered) and the final records:
//   - each probe's answer matches the ledger as it stood (found exactly
//     when an entry of that idempotency key was there), and asks by the
//     idempotency key the tool sent for that identity;
//   - a record resolved by a probe is completed, its identity ran exactly
//     once on the ledger, as that execution, its data is that entry's
//     result, and the ledger answered a probe of it with that entry;
//   - an execution released by a probe (answered 404, and no longer its
//     identity's record) never ran: the ledger has no entry of it.
//
// A released identity may run once more, under a new execution, when a
// retry comes (checkLedger holds that to one execution).
func checkProbes(entries []ledgerapi.Entry, probes []ledgerapi.Probe, final map[string]finalRecord) (probeStats, []string) {
	var anomalies []string
	st := probeStats{Asked: len(probes)}
	byKey := map[string][]ledgerapi.Entry{}
	for _, e := range entries {
		byKey[e.RequestID] = append(byKey[e.RequestID], e)
	}
	asked := map[string]bool{}
	foundAs := map[string]uint64{} // execution → the entry a probe of it was answered with
	notFound := map[string]ledgerapi.Probe{}
	for _, p := range probes {
		asked[p.ExecutionID] = true
		var before []ledgerapi.Entry
		for _, e := range entries {
			if e.IdempotencyKey == p.IdempotencyKey && e.Seq <= p.Entries {
				before = append(before, e)
			}
		}
		switch {
		case p.Found != (len(before) > 0):
			anomalies = append(anomalies, fmt.Sprintf("%s: probe of %s answered found=%v with %d entries of its key on the ledger", p.RequestID, p.ExecutionID, p.Found, len(before)))
		case p.Found && p.Seq != before[0].Seq:
			anomalies = append(anomalies, fmt.Sprintf("%s: probe of %s answered with entry %d, the first of its key is %d", p.RequestID, p.ExecutionID, p.Seq, before[0].Seq))
		}
		for _, e := range byKey[p.RequestID] {
			if e.IdempotencyKey != p.IdempotencyKey {
				anomalies = append(anomalies, fmt.Sprintf("%s: probe of %s asked by key %q, the tool sent %q", p.RequestID, p.ExecutionID, p.IdempotencyKey, e.IdempotencyKey))
				break
			}
		}
		if p.Found {
			foundAs[p.ExecutionID] = p.Seq
		} else if _, seen := notFound[p.ExecutionID]; !seen {
			notFound[p.ExecutionID] = p
		}
	}
	st.Executions = len(asked)

	for key, fr := range sortedPairs(final) {
		if !fr.found || fr.rec.ResolvedBy != resolvedByProbe {
			continue
		}
		st.Completed++
		rec, es := fr.rec, byKey[key]
		var data ledgerapi.Result
		seq, answered := foundAs[rec.ExecutionID]
		switch {
		case rec.Status != "completed":
			anomalies = append(anomalies, fmt.Sprintf("%s: resolved by a probe as %q, want completed (a 404 releases)", key, rec.Status))
		case len(es) != 1:
			anomalies = append(anomalies, fmt.Sprintf("%s: resolved completed by a probe (execution %s) with %d ledger entries", key, rec.ExecutionID, len(es)))
		case es[0].ExecutionID != rec.ExecutionID:
			anomalies = append(anomalies, fmt.Sprintf("%s: resolved completed by a probe as %s, the ledger ran %s", key, rec.ExecutionID, es[0].ExecutionID))
		case json.Unmarshal(rec.Data, &data) != nil || data != (ledgerapi.Result{Seq: es[0].Seq, ExecutionID: es[0].ExecutionID, Value: es[0].Value}):
			anomalies = append(anomalies, fmt.Sprintf("%s: resolved completed by a probe with data %s, the ledger entry is %+v", key, rec.Data, es[0]))
		case !answered || seq != es[0].Seq:
			anomalies = append(anomalies, fmt.Sprintf("%s: resolved completed by a probe (execution %s), but the ledger answered no probe of it with its entry", key, rec.ExecutionID))
		}
	}

	for exec, p := range sortedPairs(notFound) {
		fr := final[p.RequestID]
		if fr.found && fr.rec.ExecutionID == exec {
			continue // not released: settled otherwise, or asked again
		}
		st.Released++
		ranAgain := false
		for _, e := range byKey[p.RequestID] {
			if e.ExecutionID == exec {
				anomalies = append(anomalies, fmt.Sprintf("%s: %s released by a probe (the ledger had no entry, %d entries in), yet it ran: %+v", p.RequestID, exec, p.Entries, e))
			} else if fr.found && e.ExecutionID == fr.rec.ExecutionID {
				ranAgain = true
			}
		}
		if ranAgain {
			st.RanAgain++
		}
	}
	return st, anomalies
}
