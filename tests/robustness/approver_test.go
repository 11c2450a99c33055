package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/tests/robustness/ledgerapi"
	"github.com/carmyhq/carmy/tests/testutil/wait"
)

// TestCheckGated: a gated identity denied or expired that ran, one
// completed without its one ledger entry, a decision whose answer the
// final record contradicts, and a decision never answered are anomalies;
// the rest is counted.
func TestCheckGated(t *testing.T) {
	rec := func(exec, status string) finalRecord {
		return finalRecord{found: true, rec: client.Execution{ExecutionID: exec, Status: client.Status(status)}}
	}
	entry := func(key, exec string) ledgerapi.Entry {
		return ledgerapi.Entry{Seq: 1, RequestID: key, ExecutionID: exec, Value: "v"}
	}
	gatedOps := func(keys ...string) []Op {
		var ops []Op
		for _, k := range keys {
			ops = append(ops, Op{Key: k, Kind: KindAwaiting, Gated: true}, Op{Key: k, Kind: KindOK, Gated: true})
		}
		return append(ops, Op{Key: "plain", Kind: KindOK})
	}
	approved := func(key, exec, status string) decision {
		return decision{Key: key, ExecutionID: exec, Choice: choiceApprove, HTTPStatus: http.StatusOK, Status: status, Attempts: 1}
	}
	for _, tc := range []struct {
		name      string
		final     map[string]finalRecord
		entries   []ledgerapi.Entry
		decisions []decision
		want      string // a part of the one anomaly expected; "" for none
	}{
		{"clean", map[string]finalRecord{"a": rec("e1", "completed"), "d": rec("e2", "denied"), "x": rec("e3", "expired")},
			[]ledgerapi.Entry{entry("a", "e1")},
			[]decision{approved("a", "e1", "completed"), {Key: "d", ExecutionID: "e2", Choice: choiceDeny, HTTPStatus: 200, Status: "denied"},
				{Key: "x", ExecutionID: "e3", Choice: choiceIgnore}, {Key: "a", ExecutionID: "e1", Choice: choiceApprove, HTTPStatus: 409, Status: "completed", Code: "INVALID_STATE"}}, ""},
		{"denied yet ran", map[string]finalRecord{"d": rec("e2", "denied")}, []ledgerapi.Entry{entry("d", "e2")}, nil, "yet the tool ran"},
		{"expired yet ran", map[string]finalRecord{"x": rec("e3", "expired")}, []ledgerapi.Entry{entry("x", "e9")}, nil, "yet the tool ran"},
		{"completed without running", map[string]finalRecord{"a": rec("e1", "completed")}, nil, nil, "with ledger entries"},
		{"approved, then denied", map[string]finalRecord{"a": rec("e1", "denied")}, nil, []decision{approved("a", "e1", "completed")}, "the identity's record is e1 denied"},
		{"approved running, then expired", map[string]finalRecord{"a": rec("e1", "expired")}, nil,
			[]decision{{Key: "a", ExecutionID: "e1", Choice: choiceApprove, HTTPStatus: 202, Status: "running"}}, "answered running, yet the record is expired"},
		{"approved running, released and run again", map[string]finalRecord{"a": rec("e2", "completed")}, []ledgerapi.Entry{entry("a", "e2")},
			[]decision{{Key: "a", ExecutionID: "e1", Choice: choiceApprove, HTTPStatus: 202, Status: "running"}}, ""},
		{"approved uncertain, then expired", map[string]finalRecord{"a": rec("e1", "expired")}, nil,
			[]decision{{Key: "a", ExecutionID: "e1", Choice: choiceApprove, HTTPStatus: 409, Code: codeUncertain, Status: "interrupted"}}, "answered interrupted, yet the record is expired"},
		{"approved uncertain, settled by the probe", map[string]finalRecord{"a": rec("e1", "completed")}, []ledgerapi.Entry{entry("a", "e1")},
			[]decision{{Key: "a", ExecutionID: "e1", Choice: choiceApprove, HTTPStatus: 409, Code: codeUncertain, Status: "interrupted"}}, ""},
		{"approved uncertain, released by the probe", map[string]finalRecord{}, nil,
			[]decision{{Key: "a", ExecutionID: "e1", Choice: choiceApprove, HTTPStatus: 409, Code: codeUncertain, Status: "interrupted"}}, ""},
		{"approved uncertain, no record, yet it ran", map[string]finalRecord{}, []ledgerapi.Entry{entry("a", "e1")},
			[]decision{{Key: "a", ExecutionID: "e1", Choice: choiceApprove, HTTPStatus: 409, Code: codeUncertain, Status: "interrupted"}}, "has no record"},
		{"approved completed, no record", map[string]finalRecord{}, nil,
			[]decision{approved("a", "e1", "completed")}, "has no record"},
		{"never answered", map[string]finalRecord{"a": rec("e1", "expired")}, nil,
			[]decision{{Key: "a", ExecutionID: "e1", Choice: choiceApprove, Attempts: 9, Retried: 9}}, "no answer"},
		{"outside the contract", map[string]finalRecord{"a": rec("e1", "expired")}, nil,
			[]decision{{Key: "a", ExecutionID: "e1", Choice: choiceApprove, HTTPStatus: 500, Detail: "approve answered HTTP 500"}}, "HTTP 500"},
	} {
		var keys []string
		for k := range tc.final {
			keys = append(keys, k)
		}
		st, done, got := checkGated(gatedOps(keys...), tc.decisions, tc.final, tc.entries)
		switch {
		case tc.want == "" && len(got) != 0:
			t.Errorf("%s: anomalies %q, want none", tc.name, got)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
			t.Errorf("%s: anomalies %q, want one with %q", tc.name, got, tc.want)
		}
		if st.Identities != len(keys) || st.Calls != 2*len(keys) || st.Awaiting != len(keys) {
			t.Errorf("%s: stats %+v, want %d identities, %d calls, %d awaiting", tc.name, st, len(keys), 2*len(keys), len(keys))
		}
		if tc.name == "clean" {
			if st.Approved != 1 || st.Denied != 1 || st.Ignored != 1 || st.Already != 1 || st.Ran != 1 ||
				st.Final["completed"] != 1 || st.Final["denied"] != 1 || st.Final["expired"] != 1 {
				t.Errorf("clean: stats %+v", st)
			}
			if len(done) != 1 || done[0].executionID != "e1" {
				t.Errorf("clean: approvals answered completed %+v, want e1's", done)
			}
		}
	}
}

// fakeGates is a node's approval queue on 127.0.0.1: the approver token
// reads it and decides; a decision is refused 503 the first time it
// reaches the node (so that the approver must send it again), then taken
// once; another one is 409 INVALID_STATE.
type fakeGates struct {
	t     *testing.T
	token string

	mu       sync.Mutex
	awaiting map[string]string // execution → request_id
	decided  map[string]string // execution → approve or deny
	refused  map[string]bool
	requests map[string]int // execution → decisions received
}

func (f *fakeGates) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+f.token {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodGet && r.URL.Path == "/v1/executions" && r.URL.Query().Get("approvals") == "true" {
		var page struct {
			Executions []queued `json:"executions"`
		}
		page.Executions = []queued{}
		for exec, key := range sortedPairs(f.awaiting) {
			page.Executions = append(page.Executions, queued{ExecutionID: exec, RequestID: key, Status: statusAwaiting})
		}
		_ = json.NewEncoder(w).Encode(page)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/executions/")
	exec, choice, _ := strings.Cut(rest, "/")
	if !ok || r.Method != http.MethodPost || (choice != choiceApprove && choice != choiceDeny) {
		f.t.Errorf("unexpected request %s %s", r.Method, r.URL)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	f.requests[exec]++
	key, waiting := f.awaiting[exec]
	switch {
	case waiting && !f.refused[exec]:
		f.refused[exec] = true
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"code":"UNAVAILABLE","message":"m"}}`)
	case waiting && choice == choiceApprove:
		delete(f.awaiting, exec)
		f.decided[exec] = choice
		fmt.Fprintf(w, `{"execution_id":%q,"request_id":%q,"status":"completed","data":{"seq":1,"execution_id":%q,"value":"v"}}`, exec, key, exec)
	case waiting:
		delete(f.awaiting, exec)
		f.decided[exec] = choice
		fmt.Fprintf(w, `{"execution_id":%q,"request_id":%q,"status":"denied","error":{"code":"APPROVAL_DENIED","message":"m"}}`, exec, key)
	default:
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, `{"error":{"code":"INVALID_STATE","message":"m","execution_id":%q,"status":"completed"}}`, exec)
	}
}

type fixedNodes map[string]string

func (f fixedNodes) urls() map[string]string { return f }

// TestApprover: the approver reads the queue of a node, decides every
// execution it learns of once (sending a decision refused 503 again),
// leaves the ones it chose to ignore, and its drain ends once nothing new
// is left; executions added while it runs are decided too.
func TestApprover(t *testing.T) {
	f := &fakeGates{t: t, token: "approver-token", awaiting: map[string]string{}, decided: map[string]string{},
		refused: map[string]bool{}, requests: map[string]int{}}
	for i := range 40 {
		f.awaiting[fmt.Sprintf("e%02d", i)] = fmt.Sprintf("k%02d", i)
	}
	srv := httptest.NewServer(f)
	defer srv.Close()
	nc := &nodeClient{hc: &http.Client{Timeout: 5 * time.Second}, tokens: runTokens{Approver: "approver-token"}}
	ap := newApprover(1, nc, fixedNodes{"n1": srv.URL})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); ap.run(ctx) }()
	wait.For(t, 10*time.Second, "the approver learns of the queue", func() error {
		if _, reads := ap.results(); reads == 0 {
			return fmt.Errorf("no read of the queue yet")
		}
		return nil
	})
	f.mu.Lock()
	f.awaiting["late"] = "k-late"
	f.mu.Unlock()
	cancel()
	<-done
	if err := ap.drain(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	decisions, _ := ap.results()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(decisions) != 41 {
		t.Fatalf("%d decisions, want one for each of the 41 executions", len(decisions))
	}
	var ignored, approved, denied int
	for _, d := range decisions {
		switch {
		case d.Choice == choiceIgnore:
			ignored++
			if f.requests[d.ExecutionID] != 0 {
				t.Errorf("%s: ignored, yet %d decisions sent", d.ExecutionID, f.requests[d.ExecutionID])
			}
			if _, still := f.awaiting[d.ExecutionID]; !still {
				t.Errorf("%s: ignored, yet decided", d.ExecutionID)
			}
			continue
		case d.HTTPStatus != http.StatusOK || d.Attempts != 2 || d.Retried != 1 || d.Detail != "":
			t.Errorf("%s: %+v, want answered 200 at the second attempt", d.ExecutionID, d)
		case f.decided[d.ExecutionID] != d.Choice:
			t.Errorf("%s: chose %s, the node took %q", d.ExecutionID, d.Choice, f.decided[d.ExecutionID])
		case d.Choice == choiceApprove && (!d.hasData || d.Status != "completed"):
			t.Errorf("%s: approval answered %+v, want completed with its data", d.ExecutionID, d)
		}
		if d.Choice == choiceApprove {
			approved++
		} else {
			denied++
		}
	}
	if approved == 0 || denied == 0 || ignored == 0 || len(f.awaiting) != ignored {
		t.Errorf("approved %d, denied %d, ignored %d (left awaiting %d): want some of each", approved, denied, ignored, len(f.awaiting))
	}
}

// TestDecisionAnswers: the answers of a decision outside the contract (an
// approval answered denied, a 500, a 409 of another code) are anomalies;
// no answer is not settled, and is sent again.
func TestDecisionAnswers(t *testing.T) {
	for _, tc := range []struct {
		choice  string
		status  int
		body    string
		settled bool
		bad     bool
	}{
		{choiceApprove, 200, `{"execution_id":"e1","status":"completed","data":{}}`, true, false},
		{choiceApprove, 202, `{"execution_id":"e1","status":"running"}`, true, false},
		{choiceApprove, 200, `{"execution_id":"e1","status":"expired"}`, true, false},
		{choiceApprove, 200, `{"execution_id":"e1","status":"denied"}`, true, true},
		{choiceApprove, 200, `{"execution_id":"e2","status":"completed"}`, true, true},
		{choiceDeny, 200, `{"execution_id":"e1","status":"denied"}`, true, false},
		{choiceDeny, 202, `{"execution_id":"e1","status":"running"}`, true, true},
		{choiceDeny, 409, `{"error":{"code":"INVALID_STATE","message":"m","status":"completed"}}`, true, false},
		{choiceDeny, 409, `{"error":{"code":"IDEMPOTENCY_CONFLICT","message":"m"}}`, true, true},
		{choiceApprove, 404, `{"error":{"code":"NOT_FOUND","message":"m"}}`, true, false},
		{choiceApprove, 409, `{"error":{"code":"EXECUTION_UNCERTAIN","message":"m","execution_id":"e1","status":"interrupted"}}`, true, false},
		{choiceDeny, 409, `{"error":{"code":"EXECUTION_UNCERTAIN","message":"m","execution_id":"e1","status":"interrupted"}}`, true, true},
		{choiceApprove, 409, `{"error":{"code":"EXECUTION_UNCERTAIN","message":"m","execution_id":"e1","status":"completed"}}`, true, true},
		{choiceApprove, 503, `{"error":{"code":"UNAVAILABLE","message":"m"}}`, false, false},
		{choiceApprove, 500, `oops`, false, true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(tc.status)
			fmt.Fprint(w, tc.body)
		}))
		nc := &nodeClient{hc: &http.Client{Timeout: 5 * time.Second}}
		d := decision{ExecutionID: "e1", Choice: tc.choice}
		nc.decide(t.Context(), srv.URL, tc.choice, &d)
		srv.Close()
		if d.settled() != tc.settled || (d.Detail != "") != tc.bad {
			t.Errorf("%s answered %d %s: settled %v, detail %q; want settled %v, outside the contract %v", tc.choice, tc.status, tc.body, d.settled(), d.Detail, tc.settled, tc.bad)
		}
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	d := decision{ExecutionID: "e1"}
	(&nodeClient{hc: &http.Client{Timeout: time.Second}}).decide(t.Context(), url, choiceApprove, &d)
	if d.settled() || d.Detail != "" {
		t.Errorf("no answer: %+v, want unsettled, within the contract", d)
	}
}
