package robustness

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api/client"
	"github.com/carmyhq/carmy/tests/robustness/ledgerapi"
)

func TestCheckLedger(t *testing.T) {
	entry := func(seq uint64, key, exec string) ledgerapi.Entry {
		return ledgerapi.Entry{Seq: seq, RequestID: key, ExecutionID: exec, Value: "v"}
	}
	answer := func(key, exec string, seq uint64) completedAnswer {
		return completedAnswer{key: key, executionID: exec, node: "n1", hasData: true,
			data: ledgerapi.Result{Seq: seq, ExecutionID: exec, Value: "v"}}
	}
	rec := func(exec string) finalRecord {
		return finalRecord{found: true, rec: client.Execution{ExecutionID: exec, Status: client.StatusCompleted}}
	}
	for _, tc := range []struct {
		name    string
		entries []ledgerapi.Entry
		done    []completedAnswer
		final   map[string]finalRecord
		want    string // a part of the one anomaly expected; "" for none
	}{
		{"clean", []ledgerapi.Entry{entry(1, "k", "e1")}, []completedAnswer{answer("k", "e1", 1)}, map[string]finalRecord{"k": rec("e1")}, ""},
		{"ran twice", []ledgerapi.Entry{entry(1, "k", "e1"), entry(2, "k", "e2")}, nil, map[string]finalRecord{"k": rec("e1")}, "executed 2 times"},
		{"completed without entry", nil, []completedAnswer{answer("k", "e1", 1)}, map[string]finalRecord{"k": rec("e1")}, "0 ledger entries"},
		{"answer of another execution", []ledgerapi.Entry{entry(1, "k", "e1")}, []completedAnswer{answer("k", "e9", 1)}, map[string]finalRecord{"k": rec("e1")}, "the ledger e1"},
		{"answer with other data", []ledgerapi.Entry{entry(1, "k", "e1")}, []completedAnswer{answer("k", "e1", 7)}, map[string]finalRecord{"k": rec("e1")}, "carries"},
		{"ran but record released", []ledgerapi.Entry{entry(1, "k", "e1")}, nil, map[string]finalRecord{"k": {}}, "no record remains"},
		{"ran but record names another", []ledgerapi.Entry{entry(1, "k", "e1")}, nil, map[string]finalRecord{"k": rec("e2")}, "the record names e2"},
		{"never called", []ledgerapi.Entry{entry(1, "x", "e1")}, nil, map[string]finalRecord{}, "never called"},
	} {
		got := checkLedger(tc.entries, tc.done, tc.final)
		switch {
		case tc.want == "" && len(got) != 0:
			t.Errorf("%s: anomalies %q, want none", tc.name, got)
		case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
			t.Errorf("%s: anomalies %q, want one with %q", tc.name, got, tc.want)
		}
	}
}

func TestCheckReplays(t *testing.T) {
	ok := func(exec, result string) Op {
		return Op{Key: "k", Kind: KindOK, ExecutionID: exec, Status: "completed", Result: result}
	}
	if got := checkReplays([]Op{ok("e1", "r"), {Key: "k", Kind: KindUncertain}, ok("e1", "r")}); len(got) != 0 {
		t.Errorf("equal replays: %q", got)
	}
	if got := checkReplays([]Op{ok("e1", "r"), ok("e1", "other")}); len(got) != 1 {
		t.Errorf("a replay with another result: %q, want one anomaly", got)
	}
	if got := checkReplays([]Op{ok("e1", "r"), ok("e2", "r")}); len(got) != 1 {
		t.Errorf("a replay of another execution: %q, want one anomaly", got)
	}
}

func TestUnavailableSeconds(t *testing.T) {
	s := int64(time.Second)
	ops := []Op{
		{Call: 0, Kind: KindOK},
		{Call: s + 1, Kind: KindUnavailable}, {Call: s + 2, Kind: KindUnknown}, // second 1: nothing settled
		{Call: 2*s + 1, Kind: KindUnavailable}, {Call: 2*s + 2, Kind: KindConflict},
		{Call: 4 * s, Kind: KindUnknown}, // second 4
	}
	if got := unavailableSeconds(ops); got != 2 {
		t.Fatalf("unavailableSeconds = %d, want 2", got)
	}
}

// answerOf serves one answer on 127.0.0.1 and returns how the harness
// classifies what its client made of it.
func answerOf(t *testing.T, status int, h http.Header, body string) outcome {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		maps.Copy(w.Header(), h)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	nc := &nodeClient{hc: &http.Client{Timeout: callTimeout}}
	return nc.call(t.Context(), srv.URL, "k", ledgerapi.Args{Value: "v"})
}

func TestClassify(t *testing.T) {
	replayed := http.Header{"Idempotent-Replayed": []string{"true"}}
	for _, tc := range []struct {
		status int
		h      http.Header
		body   string
		kind   Kind
		bad    bool // an answer outside the contract
	}{
		{200, nil, `{"execution_id":"e1","status":"completed","data":{"seq":1,"execution_id":"e1","value":"v"},"replayed":false}`, KindOK, false},
		{200, replayed, `{"execution_id":"e1","status":"timed_out","error":{"code":"TIMEOUT"},"replayed":true}`, KindOK, false},
		{200, nil, `{"execution_id":"e1","status":"completed","replayed":true}`, KindUnknown, true},       // header disagrees
		{200, replayed, `{"execution_id":"e1","status":"completed","replayed":false}`, KindUnknown, true}, // header disagrees
		{200, nil, `{"status":"running"}`, KindUnknown, true},
		{200, nil, `{"execution_id":"e1","status":"running"}`, KindUnknown, true},
		{200, nil, `{"execution_id":"e1","status":"completed","started_at":"s"}`, KindUnknown, true},
		{409, nil, `{"error":{"code":"IDEMPOTENCY_CONFLICT","message":"m","execution_id":"e1"}}`, KindConflict, false},
		{409, nil, `{"error":{"code":"EXECUTION_UNCERTAIN","message":"m","execution_id":"e1","status":"running"}}`, KindUncertain, false},
		{409, nil, `{"error":{"code":"EXECUTION_UNCERTAIN","message":"m","status":"completed"}}`, KindUnknown, true},
		{503, nil, `{"error":{"code":"UNAVAILABLE","message":"m"}}`, KindUnavailable, false},
		{503, nil, `{"error":{"code":"IDEMPOTENCY_CAPACITY","message":"m"}}`, KindUnknown, true},
		{500, nil, `<html>`, KindUnknown, true},
		// Approval gates: a gated call awaiting its decision, and a
		// denial's replay.
		{202, nil, `{"execution_id":"e1","status":"awaiting_approval","replayed":false,"approval":{"approvers":["approver"],"expires_at":"2026-12-04T10:00:15.000Z"}}`, KindAwaiting, false},
		{200, replayed, `{"execution_id":"e1","status":"denied","error":{"code":"APPROVAL_DENIED","message":"m"},"replayed":true}`, KindOK, false},
		{200, replayed, `{"execution_id":"e1","status":"expired","error":{"code":"APPROVAL_EXPIRED","message":"m"},"replayed":true}`, KindOK, false},
		{200, nil, `{"execution_id":"e1","status":"approved"}`, KindUnknown, true},
	} {
		o := answerOf(t, tc.status, tc.h, tc.body)
		if o.kind != tc.kind || (o.detail != "") != tc.bad || o.httpStatus != tc.status {
			t.Errorf("%d %s: kind %v detail %q HTTP %d; want kind %v, outside the contract %v", tc.status, tc.body, o.kind, o.detail, o.httpStatus, tc.kind, tc.bad)
		}
	}
	const (
		started  = `"started_at":"2026-12-04T10:00:00.1Z"`
		finished = `"finished_at":"2026-12-04T10:00:00.2Z"`
		later    = `"finished_at":"2026-12-04T10:00:00.3Z"`
	)
	a := answerOf(t, 200, nil, `{"execution_id":"e1","status":"completed","data":{"seq":3,"execution_id":"e1","value":"v"},`+started+`,`+finished+`}`)
	b := answerOf(t, 200, replayed, `{"execution_id":"e1","status":"completed","data":{"seq":3, "execution_id":"e1","value":"v"},"replayed":true,`+started+`,`+finished+`}`)
	c := answerOf(t, 200, replayed, `{"execution_id":"e1","status":"completed","data":{"seq":3,"execution_id":"e1","value":"v"},"replayed":true,`+started+`,`+later+`}`)
	if !a.hasData || a.data.Seq != 3 || a.result != b.result || !b.replayed || a.replayed {
		t.Fatalf("a replay differing only in white space must encode alike: %+v vs %+v", a, b)
	}
	if a.stamps == c.stamps || a.stamps != b.stamps {
		t.Fatalf("timestamps %q, %q, %q: a replay with another finished_at must differ", a.stamps, b.stamps, c.stamps)
	}
	op := func(o outcome) Op {
		return Op{Key: "k", Kind: o.kind, ExecutionID: o.executionID, Status: o.status, Result: o.result, Stamps: o.stamps}
	}
	if got := checkReplays([]Op{op(a), op(b)}); len(got) != 0 {
		t.Errorf("equal replays over HTTP: %q", got)
	}
	if got := checkReplays([]Op{op(a), op(c)}); len(got) != 1 || !strings.Contains(got[0], "timestamps") {
		t.Errorf("a replay with another finished_at: %q, want one anomaly", got)
	}
}

// TestClassifyNoAnswer: a call that got no answer (the node is gone, or
// the answer did not come within callTimeout) is an unknown outcome, not
// an answer outside the contract.
func TestClassifyNoAnswer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	nc := &nodeClient{hc: &http.Client{Timeout: callTimeout}}
	if o := nc.call(t.Context(), url, "k", ledgerapi.Args{Value: "v"}); o.kind != KindUnknown || o.detail != "" {
		t.Errorf("a refused connection: %+v, want an unknown outcome without detail", o)
	}
	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer slow.Close()
	defer close(hang)
	nc = &nodeClient{hc: &http.Client{Timeout: 50 * time.Millisecond}}
	if o := nc.call(t.Context(), slow.URL, "k", ledgerapi.Args{Value: "v"}); o.kind != KindUnknown || o.detail != "" {
		t.Errorf("no answer within the client's timeout: %+v, want an unknown outcome without detail", o)
	}
}

// TestClassifyMCP: an answer of /mcp is classified as the HTTP answer of
// the same record or refusal is, with the same result encoding (so that
// the model and the replay check compare answers across transports), and
// what fits no kind of the contract is an anomaly.
func TestClassifyMCP(t *testing.T) {
	result := func(meta, content, structured string, isError bool) string {
		return `{"jsonrpc":"2.0","id":1,"result":{"_meta":` + meta + `,"content":[{"type":"text","text":` + content + `}],"structuredContent":` + structured +
			map[bool]string{true: `,"isError":true`, false: ``}[isError] + `}}`
	}
	data := `{"seq":3,"execution_id":"e1","value":"v"}`
	completed := result(`{"carmy/execution_id":"e1","carmy/request_id":"k","carmy/status":"completed","carmy/replayed":true}`,
		`"{\"seq\":3,\"execution_id\":\"e1\",\"value\":\"v\"}"`, data, false)
	timedOut := result(`{"carmy/execution_id":"e1","carmy/request_id":"k","carmy/status":"timed_out","carmy/replayed":false}`,
		`"{\"error\":{\"code\":\"TIMEOUT\",\"message\":\"m\"}}"`, `{"error":{"code":"TIMEOUT","message":"m"}}`, true)
	pending := `{"error":{"code":"APPROVAL_PENDING","execution_id":"e1","message":"m"}}`
	awaiting := result(`{"carmy/execution_id":"e1","carmy/request_id":"k","carmy/status":"awaiting_approval","carmy/replayed":false}`,
		strconvQuote(pending), pending, true)
	deniedErr := `{"error":{"code":"APPROVAL_DENIED","message":"m"}}`
	denied := result(`{"carmy/execution_id":"e1","carmy/request_id":"k","carmy/status":"denied","carmy/replayed":true}`,
		strconvQuote(deniedErr), deniedErr, true)
	refusal := func(code, extra string) string {
		return result(`{"carmy/error_code":"`+code+`"}`, `"x"`, `{"error":{"code":"`+code+`","message":"m"`+extra+`}}`, true)
	}
	for _, tc := range []struct {
		status int
		body   string
		kind   Kind
		bad    bool
	}{
		{200, completed, KindOK, false},
		{200, timedOut, KindOK, false},
		{200, refusal("IDEMPOTENCY_CONFLICT", `,"execution_id":"e1"`), KindConflict, false},
		{200, refusal("EXECUTION_UNCERTAIN", `,"execution_id":"e1","status":"interrupted"`), KindUncertain, false},
		{200, refusal("EXECUTION_UNCERTAIN", `,"execution_id":"e1","status":"completed"`), KindUnknown, true},
		{200, refusal("UNAVAILABLE", ``), KindUnavailable, false},
		{200, refusal("IDEMPOTENCY_CAPACITY", ``), KindUnknown, true},
		{200, strings.Replace(completed, `"carmy/request_id":"k"`, `"carmy/request_id":"other"`, 1), KindUnknown, true},
		{200, strings.Replace(completed, `"carmy/replayed":true`, `"carmy/replayed":true,"x":1`, 1) + "x", KindUnknown, true},
		{200, strings.Replace(timedOut, `,"isError":true`, ``, 1), KindUnknown, true},
		{200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"internal error"}}`, KindUnknown, true},
		{401, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no token"}}`, KindUnknown, true},
		{502, `<html>`, KindUnknown, true},
		{200, awaiting, KindAwaiting, false},
		{200, strings.Replace(awaiting, `"APPROVAL_PENDING"`, `"TOOL_ERROR"`, 1), KindUnknown, true},
		{200, strings.Replace(awaiting, `"execution_id":"e1"`, `"execution_id":"e2"`, 1), KindUnknown, true},
		{200, denied, KindOK, false},
	} {
		o := classifyMCP(tc.status, "k", []byte(tc.body))
		if o.kind != tc.kind || (o.detail != "") != tc.bad {
			t.Errorf("%d %s: kind %v detail %q; want kind %v, outside the contract %v", tc.status, tc.body, o.kind, o.detail, tc.kind, tc.bad)
		}
	}
	overMCP := classifyMCP(200, "k", []byte(completed))
	overHTTP := answerOf(t, 200, http.Header{"Idempotent-Replayed": []string{"true"}},
		`{"execution_id":"e1","status":"completed","data":`+data+`,"replayed":true,"started_at":"2026-12-04T10:00:00.1Z","finished_at":"2026-12-04T10:00:00.2Z"}`)
	if overMCP.result != overHTTP.result || !overMCP.hasData || overMCP.data != overHTTP.data || !overMCP.replayed || overMCP.stamps != "" {
		t.Errorf("the same record over MCP %+v and over HTTP %+v", overMCP, overHTTP)
	}
	deniedMCP := classifyMCP(200, "k", []byte(denied))
	deniedHTTP := answerOf(t, 200, http.Header{"Idempotent-Replayed": []string{"true"}},
		`{"execution_id":"e1","status":"denied","error":{"message":"m","code":"APPROVAL_DENIED"},"replayed":true}`)
	if deniedMCP.result != deniedHTTP.result || deniedMCP.status != statusDenied {
		t.Errorf("a denied record over MCP %q and over HTTP %q", deniedMCP.result, deniedHTTP.result)
	}
	failedMCP := classifyMCP(200, "k", []byte(timedOut))
	failedHTTP := answerOf(t, 200, nil, `{"execution_id":"e1","status":"timed_out","error":{"message":"m","code":"TIMEOUT"},"replayed":false}`)
	if failedMCP.result != failedHTTP.result || failedMCP.hasData {
		t.Errorf("a timed_out record over MCP %q and over HTTP %q", failedMCP.result, failedHTTP.result)
	}
}

// strconvQuote is s as a JSON string.
func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
