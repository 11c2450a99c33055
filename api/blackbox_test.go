package api_test

// Black-box tests: a built `carmy serve` process on loopback, driven over
// real HTTP, asserting the rows of the outcome table of docs/api.md#concepts and of the error
// table of docs/errors.md that one node can show.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// bbAnswer is one HTTP answer, decoded.
type bbAnswer struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (a bbAnswer) str(path ...string) string {
	var v any = a.body
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// errCode returns error.code of an error envelope.
func (a bbAnswer) errCode() string { return a.str("error", "code") }

// bbDo sends one request and decodes the JSON answer; every answer must be
// a JSON object, whatever its status.
func bbDo(t *testing.T, method, url, body string, header map[string]string) bbAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := bbAnswer{status: resp.StatusCode, header: resp.Header, raw: raw}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s %s: Content-Type %q, body %q", method, url, ct, raw)
	}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("%s %s: answer is not a JSON object: %q", method, url, raw)
	}
	return a
}

// bbWant checks an error answer's status and code.
func bbWant(t *testing.T, what string, a bbAnswer, status int, code string) {
	t.Helper()
	if a.status != status || a.errCode() != code || a.str("error", "message") == "" {
		t.Fatalf("%s: got %d %s, want %d %s", what, a.status, a.raw, status, code)
	}
}

type bbNode struct {
	*testutil.Node
	t *testing.T
}

func (n bbNode) call(body string, header ...string) bbAnswer {
	n.t.Helper()
	h := map[string]string{}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	return bbDo(n.t, http.MethodPost, n.URL+"/v1/tools/call", body, h)
}

func (n bbNode) get(path string, header ...string) bbAnswer {
	n.t.Helper()
	h := map[string]string{}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = header[i+1]
	}
	return bbDo(n.t, http.MethodGet, n.URL+path, "", h)
}

func (n bbNode) post(path, body string) bbAnswer {
	n.t.Helper()
	return bbDo(n.t, http.MethodPost, n.URL+path, body, nil)
}

// toolRuns returns how many times the node ran tool, from its
// carmy_tool_duration_seconds histograms (one observation per run, summed
// over the recorded statuses).
func (n bbNode) toolRuns(tool string) int {
	n.t.Helper()
	resp, err := http.Get(n.URL + "/metrics")
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		n.t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	total := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "carmy_tool_duration_seconds_count{") || !strings.Contains(line, `tool="`+tool+`"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
			n.t.Fatalf("metrics line %q: %v", line, err)
		}
		total += int(v)
	}
	return total
}

func startDev(t *testing.T, bin string, args ...string) bbNode {
	t.Helper()
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{}, append([]string{"--dev"}, args...)...)
	n.WaitReady(t, 30*time.Second)
	return bbNode{Node: n, t: t}
}

func TestBlackBoxOutcomes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	n := startDev(t, bin)

	t.Run("new identity runs and is recorded", func(t *testing.T) {
		n := bbNode{n.Node, t}
		a := n.call(`{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"order-7f3","session_id":"sess-1","metadata":{"agent":"planner"}}`)
		if a.status != 200 || a.str("status") != "completed" || a.body["replayed"] != false ||
			!strings.HasPrefix(a.str("execution_id"), "exec_") || a.str("request_id") != "order-7f3" ||
			a.str("session_id") != "sess-1" || a.str("tool") != "create_order" {
			t.Fatalf("first call: %d %s", a.status, a.raw)
		}
		if _, err := time.Parse(time.RFC3339Nano, a.str("started_at")); err != nil || !strings.HasSuffix(a.str("finished_at"), "Z") {
			t.Fatalf("timestamps: %s", a.raw)
		}
		if a.header.Get("Idempotent-Replayed") != "" {
			t.Fatal("a first run carries Idempotent-Replayed")
		}

		// The same call, spelled differently, is replayed: same body but replayed.
		b := n.call(`{ "session_id":"sess-1", "metadata":{"agent":"planner"}, "request_id":"order-7f3",
			"arguments":{ "sku" : "KB-01" }, "tool":"create_order", "timeout_ms": 9000 }`)
		if b.status != 200 || b.body["replayed"] != true || b.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry: %d %s", b.status, b.raw)
		}
		want := strings.Replace(string(a.raw), `"replayed":false`, `"replayed":true`, 1)
		if string(b.raw) != want {
			t.Fatalf("replay differs from the recorded answer:\n got %s\nwant %s", b.raw, want)
		}

		// Different arguments under the same identity: a conflict.
		c := n.call(`{"tool":"create_order","arguments":{"sku":"KB-02"},"request_id":"order-7f3","session_id":"sess-1","metadata":{"agent":"planner"}}`)
		bbWant(t, "conflict", c, 409, "IDEMPOTENCY_CONFLICT")
		if c.str("error", "execution_id") != a.str("execution_id") {
			t.Fatalf("conflict names %q, want %q", c.str("error", "execution_id"), a.str("execution_id"))
		}
		// Another session is another identity.
		d := n.call(`{"tool":"create_order","arguments":{"sku":"KB-02"},"request_id":"order-7f3","session_id":"sess-2"}`)
		if d.status != 200 || d.body["replayed"] != false {
			t.Fatalf("other session: %d %s", d.status, d.raw)
		}

		// The Idempotency-Key header stands for request_id.
		e := n.call(`{"tool":"create_order","arguments":{"sku":"KB-01"},"session_id":"sess-1","metadata":{"agent":"planner"}}`, "Idempotency-Key", "order-7f3")
		if e.status != 200 || e.str("execution_id") != a.str("execution_id") || e.body["replayed"] != true {
			t.Fatalf("Idempotency-Key retry: %d %s", e.status, e.raw)
		}
		f := n.call(`{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"other"}`, "Idempotency-Key", "order-7f3")
		bbWant(t, "header and body differ", f, 400, "INVALID_REQUEST")
	})

	t.Run("running and cancelled", func(t *testing.T) {
		n := bbNode{n.Node, t}
		body := `{"tool":"sleep","arguments":{"ms":30000},"request_id":"slow-1"}`
		first := make(chan bbAnswer, 1)
		go func() { first <- bbDo(t, http.MethodPost, n.URL+"/v1/tools/call", body, nil) }()
		var id string
		testutil.WaitUntil(t, 15*time.Second, "the execution to be recorded running", func() bool {
			a := bbDo(t, http.MethodGet, n.URL+"/v1/executions?request_id=slow-1", "", nil)
			id = a.str("execution_id")
			return a.status == 200 && a.str("status") == "running"
		})
		u := n.call(body)
		bbWant(t, "retry while running", u, 409, "EXECUTION_UNCERTAIN")
		if u.str("error", "status") != "running" || u.str("error", "execution_id") != id || u.header.Get("Retry-After") == "" {
			t.Fatalf("uncertain answer: %s %v", u.raw, u.header)
		}
		r := n.post("/v1/executions/"+id+"/resolve", `{"status":"released"}`)
		bbWant(t, "release of a live execution", r, 409, "INVALID_STATE")

		c := n.post("/v1/executions/"+id+"/cancel", "")
		if c.status != 200 || c.str("status") != "cancelled" || c.str("error", "code") != "CANCELLED" {
			t.Fatalf("cancel: %d %s", c.status, c.raw)
		}
		orig := <-first
		if orig.status != 200 || orig.str("status") != "cancelled" || orig.str("execution_id") != id {
			t.Fatalf("the cancelled call answered %d %s", orig.status, orig.raw)
		}
		again := n.call(body)
		if again.status != 200 || again.body["replayed"] != true || again.str("status") != "cancelled" {
			t.Fatalf("retry after cancel: %d %s", again.status, again.raw)
		}
		bbWant(t, "second cancel", n.post("/v1/executions/"+id+"/cancel", ""), 409, "INVALID_STATE")
	})

	t.Run("timeouts are recorded and replayed", func(t *testing.T) {
		n := bbNode{n.Node, t}
		body := `{"tool":"sleep","arguments":{"ms":5000},"request_id":"t-1","timeout_ms":100}`
		a := n.call(body)
		if a.status != 200 || a.str("status") != "timed_out" || a.str("error", "code") != "TIMEOUT" {
			t.Fatalf("timeout: %d %s", a.status, a.raw)
		}
		b := n.call(strings.Replace(body, `,"timeout_ms":100`, "", 1))
		if b.status != 200 || b.body["replayed"] != true || b.str("status") != "timed_out" || b.str("execution_id") != a.str("execution_id") {
			t.Fatalf("retry after timeout: %d %s", b.status, b.raw)
		}
	})

	t.Run("failed tools are recorded and replayed", func(t *testing.T) {
		n := bbNode{n.Node, t}
		a := n.call(`{"tool":"fail","arguments":{"message":"boom"},"request_id":"f-1"}`)
		if a.status != 200 || a.str("status") != "failed" || a.str("error", "code") != "TOOL_ERROR" || a.str("error", "message") != "boom" {
			t.Fatalf("fail: %d %s", a.status, a.raw)
		}
		if _, has := a.body["data"]; has {
			t.Fatalf("a failed result carries data: %s", a.raw)
		}
		if b := n.call(`{"tool":"fail","arguments":{"message":"boom"},"request_id":"f-1"}`); b.body["replayed"] != true {
			t.Fatalf("retry of a failure: %s", b.raw)
		}
	})

	t.Run("a caller that disconnects does not stop the tool", func(t *testing.T) {
		n := bbNode{n.Node, t}
		body := `{"tool":"sleep","arguments":{"ms":400},"request_id":"gone-1"}`
		client := &http.Client{Timeout: 50 * time.Millisecond}
		if resp, err := client.Post(n.URL+"/v1/tools/call", "application/json", strings.NewReader(body)); err == nil {
			resp.Body.Close()
			t.Fatal("the call answered before the client gave up")
		}
		testutil.WaitUntil(t, 15*time.Second, "the abandoned call to complete", func() bool {
			a := n.get("/v1/executions?request_id=gone-1")
			return a.status == 200 && a.str("status") == "completed"
		})
		if a := n.call(body); a.body["replayed"] != true || a.str("status") != "completed" {
			t.Fatalf("retry: %s", a.raw)
		}
	})

	t.Run("calls without request_id are not recorded", func(t *testing.T) {
		n := bbNode{n.Node, t}
		a := n.call(`{"tool":"create_order","arguments":{"sku":"X"}}`)
		b := n.call(`{"tool":"create_order","arguments":{"sku":"X"}}`)
		if a.status != 200 || b.status != 200 || a.str("execution_id") == b.str("execution_id") || a.body["replayed"] != false {
			t.Fatalf("unrecorded calls: %s / %s", a.raw, b.raw)
		}
		if _, has := a.body["request_id"]; has {
			t.Fatalf("an unrecorded call shows a request_id: %s", a.raw)
		}
		bbWant(t, "lookup of an unrecorded call", n.get("/v1/executions/"+a.str("execution_id")), 404, "NOT_FOUND")
	})

	t.Run("executions can be read and listed", func(t *testing.T) {
		n := bbNode{n.Node, t}
		var ids []string
		for i := range 3 {
			ids = append(ids, n.call(fmt.Sprintf(`{"tool":"echo","arguments":{"i":%d},"request_id":"l-%d","session_id":"list"}`, i, i)).str("execution_id"))
		}
		one := n.get("/v1/executions/" + ids[0])
		if one.status != 200 || len(one.str("fingerprint")) != 64 || one.str("node_id") != n.ID() || one.body["resolved"] != false {
			t.Fatalf("GET execution: %d %s", one.status, one.raw)
		}
		p1 := n.get("/v1/executions?session_id=list&limit=2")
		list, _ := p1.body["executions"].([]any)
		if p1.status != 200 || len(list) != 2 || p1.str("next_cursor") == "" {
			t.Fatalf("first page: %s", p1.raw)
		}
		if list[0].(map[string]any)["execution_id"] != ids[2] {
			t.Fatalf("listing is not newest first: %s", p1.raw)
		}
		p2 := n.get("/v1/executions?session_id=list&limit=2&cursor=" + p1.str("next_cursor"))
		list, _ = p2.body["executions"].([]any)
		if len(list) != 1 || list[0].(map[string]any)["execution_id"] != ids[0] || p2.str("next_cursor") != "" {
			t.Fatalf("second page: %s", p2.raw)
		}
		bbWant(t, "unknown query parameter", n.get("/v1/executions?requestId=l-1"), 400, "INVALID_REQUEST")
		bbWant(t, "lookup of a missing identity", n.get("/v1/executions?request_id=nope&session_id=list"), 404, "NOT_FOUND")
	})

	t.Run("tools and health", func(t *testing.T) {
		n := bbNode{n.Node, t}
		tools := n.get("/v1/tools")
		list, _ := tools.body["tools"].([]any)
		if tools.status != 200 || len(list) != 5 {
			t.Fatalf("tools: %s", tools.raw)
		}
		if a := n.get("/healthz"); a.status != 200 {
			t.Fatalf("healthz: %d", a.status)
		}
		if a := n.get("/readyz"); a.status != 200 {
			t.Fatalf("readyz: %d", a.status)
		}
	})

	t.Run("SIGTERM exits 0", func(t *testing.T) {
		if err := n.Stop(15 * time.Second); err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, n.Logs())
		}
	})
}

func TestBlackBoxBadInput(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	n := startDev(t, bin)
	good := n.call(`{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"keep"}`)
	if good.status != 200 {
		t.Fatalf("good call: %s", good.raw)
	}
	long := strings.Repeat("r", 256)
	big := `{"tool":"echo","arguments":{"x":"` + strings.Repeat("a", 1<<20) + `"}}`
	cases := []struct {
		name, method, path, body string
		header                   []string
		status                   int
		code, field              string
	}{
		{"malformed JSON", "POST", "/v1/tools/call", `{"tool":"echo",`, nil, 400, "INVALID_REQUEST", ""},
		{"not an object", "POST", "/v1/tools/call", `[1,2]`, nil, 400, "INVALID_REQUEST", ""},
		{"trailing data", "POST", "/v1/tools/call", `{"tool":"echo"} {}`, nil, 400, "INVALID_REQUEST", ""},
		{"wrong type of tool", "POST", "/v1/tools/call", `{"tool":7}`, nil, 400, "INVALID_REQUEST", "tool"},
		{"wrong type of arguments", "POST", "/v1/tools/call", `{"tool":"echo","arguments":"x","request_id":"a"}`, nil, 400, "INVALID_REQUEST", "arguments"},
		{"wrong type of request_id", "POST", "/v1/tools/call", `{"tool":"echo","request_id":12}`, nil, 400, "INVALID_REQUEST", "request_id"},
		{"unknown field", "POST", "/v1/tools/call", `{"tool":"echo","requestId":"a"}`, nil, 400, "INVALID_REQUEST", "requestId"},
		{"repeated field", "POST", "/v1/tools/call", `{"tool":"echo","request_id":"a","request_id":"b"}`, nil, 400, "INVALID_REQUEST", "request_id"},
		{"missing tool", "POST", "/v1/tools/call", `{"arguments":{}}`, nil, 400, "INVALID_REQUEST", "tool"},
		{"empty request_id", "POST", "/v1/tools/call", `{"tool":"echo","request_id":""}`, nil, 400, "INVALID_REQUEST", "request_id"},
		{"256-byte request_id", "POST", "/v1/tools/call", `{"tool":"echo","request_id":"` + long + `"}`, nil, 400, "INVALID_REQUEST", "request_id"},
		{"control character in request_id", "POST", "/v1/tools/call", `{"tool":"echo","request_id":"a\u0007b"}`, nil, 400, "INVALID_REQUEST", "request_id"},
		{"space in request_id", "POST", "/v1/tools/call", `{"tool":"echo","request_id":"a b"}`, nil, 400, "INVALID_REQUEST", "request_id"},
		{"bad session_id", "POST", "/v1/tools/call", `{"tool":"echo","request_id":"a","session_id":"é"}`, nil, 400, "INVALID_REQUEST", "session_id"},
		{"zero timeout", "POST", "/v1/tools/call", `{"tool":"echo","timeout_ms":0}`, nil, 400, "INVALID_REQUEST", "timeout_ms"},
		{"fractional timeout", "POST", "/v1/tools/call", `{"tool":"echo","timeout_ms":1.5}`, nil, 400, "INVALID_REQUEST", "timeout_ms"},
		{"schema violation", "POST", "/v1/tools/call", `{"tool":"create_order","arguments":{"sku":5},"request_id":"s"}`, nil, 400, "INVALID_REQUEST", "arguments.sku"},
		{"duplicate argument key", "POST", "/v1/tools/call", `{"tool":"echo","arguments":{"a":1,"a":2},"request_id":"d"}`, nil, 400, "INVALID_REQUEST", "arguments"},
		// Without a request_id, as strictly (a tool that ran would take order number 2).
		{"duplicate argument key, no request_id", "POST", "/v1/tools/call", `{"tool":"create_order","arguments":{"sku":"A","sku":"B"}}`, nil, 400, "INVALID_REQUEST", "arguments"},
		{"lone surrogate, no request_id", "POST", "/v1/tools/call", `{"tool":"create_order","arguments":{"sku":"\ud800"}}`, nil, 400, "INVALID_REQUEST", "arguments"},
		{"invalid UTF-8, no request_id", "POST", "/v1/tools/call", "{\"tool\":\"create_order\",\"arguments\":{\"sku\":\"\xff\"}}", nil, 400, "INVALID_REQUEST", "arguments"},
		{"huge exponent, no request_id", "POST", "/v1/tools/call", `{"tool":"create_order","arguments":{"sku":"A"},"metadata":{"n":1e400}}`, nil, 400, "INVALID_REQUEST", "metadata"},
		{"bad Idempotency-Key", "POST", "/v1/tools/call", `{"tool":"echo"}`, []string{"Idempotency-Key", long}, 400, "INVALID_REQUEST", "request_id"},
		{"unknown tool", "POST", "/v1/tools/call", `{"tool":"nope","request_id":"u"}`, nil, 404, "UNKNOWN_TOOL", ""},
		{"unknown route", "GET", "/v1/nothing", "", nil, 404, "NOT_FOUND", ""},
		{"profiles, off by default", "GET", "/debug/pprof/cmdline", "", nil, 404, "NOT_FOUND", ""},
		{"';' in the query", "GET", "/v1/executions?request_id=keep;session_id=x", "", nil, 400, "INVALID_REQUEST", "request_id"},
		{"unknown execution", "GET", "/v1/executions/exec_nope", "", nil, 404, "NOT_FOUND", ""},
		{"cancel of unknown execution", "POST", "/v1/executions/exec_nope/cancel", "", nil, 404, "NOT_FOUND", ""},
		{"wrong method", "DELETE", "/v1/tools/call", "", nil, 405, "METHOD_NOT_ALLOWED", ""},
		{"wrong method on health", "POST", "/healthz", "", nil, 405, "METHOD_NOT_ALLOWED", ""},
		{"body over 1 MiB", "POST", "/v1/tools/call", big, nil, 413, "PAYLOAD_TOO_LARGE", ""},
		{"wrong content type", "POST", "/v1/tools/call", `{"tool":"echo"}`, []string{"Content-Type", "text/plain"}, 415, "UNSUPPORTED_MEDIA_TYPE", ""},
		{"form content type", "POST", "/v1/tools/call", `tool=echo`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "UNSUPPORTED_MEDIA_TYPE", ""},
		{"resolve without status", "POST", "/v1/executions/" + good.str("execution_id") + "/resolve", `{}`, nil, 400, "INVALID_REQUEST", "status"},
		{"resolve of a finished execution", "POST", "/v1/executions/" + good.str("execution_id") + "/resolve", `{"status":"released"}`, nil, 409, "INVALID_STATE", ""},
		{"bad limit", "GET", "/v1/executions?limit=0", "", nil, 400, "INVALID_REQUEST", "limit"},
	}
	for _, c := range cases {
		h := map[string]string{}
		for i := 0; i+1 < len(c.header); i += 2 {
			h[c.header[i]] = c.header[i+1]
		}
		a := bbDo(t, c.method, n.URL+c.path, c.body, h)
		bbWant(t, c.name, a, c.status, c.code)
		if c.field != "" && a.str("error", "field") != c.field {
			t.Errorf("%s: field %q, want %q (%s)", c.name, a.str("error", "field"), c.field, a.raw)
		}
		// Nothing recorded was lost, and the next good call works.
		again := n.call(`{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"keep"}`)
		if again.status != 200 || again.body["replayed"] != true || again.str("execution_id") != good.str("execution_id") {
			t.Fatalf("after %s: %d %s", c.name, again.status, again.raw)
		}
	}
	// The rejected calls ran nothing: create_order ran once, for "keep".
	if runs := n.toolRuns("create_order"); runs != 1 {
		t.Fatalf("create_order ran %d times, want once (the rejected calls must not run it)", runs)
	}
}

func TestBlackBoxCapacityFailsClosed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	n := startDev(t, bin, "--max-entries", "2")
	n.call(`{"tool":"create_order","arguments":{"sku":"A"},"request_id":"c1"}`)
	n.call(`{"tool":"create_order","arguments":{"sku":"B"},"request_id":"c2"}`)
	full := n.call(`{"tool":"create_order","arguments":{"sku":"C"},"request_id":"c3"}`)
	bbWant(t, "third identity", full, 503, "IDEMPOTENCY_CAPACITY")
	if a := n.call(`{"tool":"create_order","arguments":{"sku":"A"},"request_id":"c1"}`); a.body["replayed"] != true {
		t.Fatalf("a full store stopped replaying: %s", a.raw)
	}
	// The refused call did not run: create_order ran twice, for c1 and c2.
	if runs := n.toolRuns("create_order"); runs != 2 {
		t.Fatalf("create_order ran %d times, want 2 (the refused call must not run it)", runs)
	}
}

func TestBlackBoxAuth(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	dir := t.TempDir()
	config := `demo_tools: true
auth:
  tokens:
    - {principal: planner, token_env: PLANNER_TOKEN, tools: ["*"]}
    - {principal: reader, token_env: READER_TOKEN, tools: [echo]}
  admin_token_env: ADMIN_TOKEN
`
	writeFile(t, dir+"/carmy.yaml", config)
	node := testutil.StartCarmy(t, bin, testutil.StartOptions{
		Env: []string{"PLANNER_TOKEN=planner-secret-0001", "READER_TOKEN=reader-secret-0001", "ADMIN_TOKEN=admin-secret-00001"},
	}, "--config", dir+"/carmy.yaml", "--bootstrap")
	node.WaitReady(t, 30*time.Second)
	n := bbNode{node, t}

	bbWant(t, "no token", n.call(`{"tool":"echo"}`), 401, "UNAUTHORIZED")
	bbWant(t, "unknown token", n.call(`{"tool":"echo"}`, "Authorization", "Bearer nope"), 401, "UNAUTHORIZED")
	bbWant(t, "not allowed tool", n.call(`{"tool":"create_order","arguments":{"sku":"A"}}`, "Authorization", "Bearer reader-secret-0001"), 403, "FORBIDDEN")
	tools := n.get("/v1/tools", "Authorization", "Bearer reader-secret-0001")
	if list, _ := tools.body["tools"].([]any); len(list) != 1 {
		t.Fatalf("reader sees tools %s", tools.raw)
	}

	mine := n.call(`{"tool":"echo","request_id":"shared-id"}`, "Authorization", "Bearer planner-secret-0001")
	id := mine.str("execution_id")
	if mine.status != 200 {
		t.Fatalf("planner call: %s", mine.raw)
	}
	// The same request_id from another principal is another identity.
	theirs := n.call(`{"tool":"echo","request_id":"shared-id"}`, "Authorization", "Bearer reader-secret-0001")
	if theirs.status != 200 || theirs.body["replayed"] != false || theirs.str("execution_id") == id {
		t.Fatalf("reader's call: %s", theirs.raw)
	}
	bbWant(t, "another principal's execution", n.get("/v1/executions/"+id, "Authorization", "Bearer reader-secret-0001"), 404, "NOT_FOUND")
	if a := n.get("/v1/executions/"+id, "Authorization", "Bearer admin-secret-00001"); a.status != 200 || a.str("principal") != "planner" {
		t.Fatalf("admin read: %s", a.raw)
	}
	if a := n.get("/healthz"); a.status != 200 {
		t.Fatal("healthz needs no token")
	}
}

// TestBlackBoxTokenGuessing checks issue 14 finding 6 against the binary:
// tokens shorter than 16 bytes are refused at start, naming the variable
// but not the value; two Authorization headers are 400; after 10 failed
// authentications a minute (the default) from one address, its requests
// are 429 RATE_LIMITED with Retry-After, the right token's included,
// while another address is served; the failures are logged at WARN,
// without any token; a configured metrics token guards /metrics.
func TestBlackBoxTokenGuessing(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	dir := t.TempDir()
	writeFile(t, dir+"/carmy.yaml", `demo_tools: true
auth:
  tokens:
    - {principal: planner, token_env: PLANNER_TOKEN, tools: ["*"]}
  admin_token_env: ADMIN_TOKEN
  metrics_token_env: METRICS_TOKEN
`)
	const (
		planner = "planner-token-0123456789"
		admin   = "admin-token-0123456789"
		metrics = "metrics-token-0123456789"
	)
	for _, short := range []string{"PLANNER_TOKEN=planner-short", "ADMIN_TOKEN=admin-short", "METRICS_TOKEN=metric-short"} {
		env := []string{"PLANNER_TOKEN=" + planner, "ADMIN_TOKEN=" + admin, "METRICS_TOKEN=" + metrics, short}
		_, err := testutil.Launch(t, bin, testutil.StartOptions{Env: env}, "--config", dir+"/carmy.yaml", "--bootstrap")
		name, value, _ := strings.Cut(short, "=")
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "16 bytes") || strings.Contains(err.Error(), value) {
			t.Fatalf("a node with %s: %v, want a refusal naming %s and 16 bytes, not the value", short, err, name)
		}
	}

	node := testutil.StartCarmy(t, bin, testutil.StartOptions{
		Env: []string{"PLANNER_TOKEN=" + planner, "ADMIN_TOKEN=" + admin, "METRICS_TOKEN=" + metrics},
	}, "--config", dir+"/carmy.yaml", "--bootstrap")
	node.WaitReady(t, 30*time.Second)
	one, two := fromAddr("127.0.0.1"), fromAddr("127.0.0.2")
	callURL := node.URL + "/v1/tools/call"
	body := `{"tool":"echo","arguments":{"n":1}}`

	a := doFrom(t, one, http.MethodPost, callURL, body, "Bearer "+planner, "Bearer "+planner)
	if e := wantError(t, a, http.StatusBadRequest, "INVALID_REQUEST"); e["field"] != "Authorization" {
		t.Fatalf("two Authorization headers: %s", a.body)
	}
	for token, status := range map[string]int{metrics: 200, admin: 200, planner: 403, "": 401} {
		var auth []string
		if token != "" {
			auth = []string{"Bearer " + token}
		}
		if a := doFrom(t, two, http.MethodGet, node.URL+"/metrics", "", auth...); a.status != status {
			t.Fatalf("GET /metrics with %q: %d, want %d", token, a.status, status)
		}
	}
	wantJSON(t, doFrom(t, one, http.MethodPost, callURL, body, "Bearer "+planner), http.StatusOK)
	guesses := make([]string, 10)
	for i := range guesses {
		guesses[i] = fmt.Sprintf("guess-%02d-0123456789abcdef", i)
		wantError(t, doFrom(t, one, http.MethodPost, callURL, body, "Bearer "+guesses[i]), http.StatusUnauthorized, "UNAUTHORIZED")
	}
	guesses = append(guesses, "guess-10-0123456789abcdef")
	a = doFrom(t, one, http.MethodPost, callURL, body, "Bearer "+guesses[10])
	if e := wantError(t, a, http.StatusTooManyRequests, "RATE_LIMITED"); e["source"] != "127.0.0.1" || a.header.Get("Retry-After") == "" {
		t.Fatalf("a wrong token after 10 failures: %v %s", a.header, a.body)
	}
	// The limit is on failures: the right token is still served.
	wantJSON(t, doFrom(t, one, http.MethodPost, callURL, body, "Bearer "+planner), http.StatusOK)
	wantJSON(t, doFrom(t, two, http.MethodPost, callURL, body, "Bearer "+planner), http.StatusOK)

	logs := node.Logs()
	if !regexp.MustCompile(`level=WARN msg="authentication failed" source=127\.0\.0\.1 failures=1 `).MatchString(logs) {
		t.Fatalf("no WARN line for the first failure:\n%s", logs)
	}
	if n := strings.Count(logs, `msg="authentication failed"`); n != 1 {
		t.Errorf("%d lines for the failures of one address within a minute, want 1:\n%s", n, logs)
	}
	for _, secret := range append(guesses, planner, admin, metrics) {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds the token %q", secret)
		}
	}
	// The rest is counted and logged when the node stops.
	if err := node.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`msg="authentication failed" source=127\.0\.0\.1 failures=9 rate_limited=1 `).MatchString(node.Logs()) {
		t.Errorf("no line with the 9 later failures and 1 refusal after the node stopped:\n%s", node.Logs())
	}
}

// TestBlackBoxPprofFlag checks --pprof: the profiles are served, and a
// node without auth says at WARN that anyone may read them.
func TestBlackBoxPprofFlag(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	n := startDev(t, bin, "--pprof")
	resp, err := http.Get(n.URL + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "--pprof") {
		t.Fatalf("GET /debug/pprof/cmdline with --pprof: %d %q", resp.StatusCode, body)
	}
	if !regexp.MustCompile(`level=WARN msg="serving /debug/pprof/ without authentication`).MatchString(n.Logs()) {
		t.Errorf("no warning that profiles are open:\n%s", n.Logs())
	}
}

func TestBlackBoxRefusesAnonymousOffLoopback(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	_, err := testutil.Launch(t, bin, testutil.StartOptions{}, "--http-addr", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("a node bound off loopback without tokens: %v", err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestBlackBoxUnavailableWithoutALeader(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	// No --bootstrap, no --join: the node waits to be added, with no leader.
	node := testutil.StartCarmy(t, bin, testutil.StartOptions{}, "--config", writeDemoConfig(t))
	n := bbNode{node, t}
	a := n.call(`{"tool":"create_order","arguments":{"sku":"A"},"request_id":"u1"}`)
	bbWant(t, "a call without a leader", a, 503, "UNAVAILABLE")
	if a.header.Get("Retry-After") == "" {
		t.Fatalf("UNAVAILABLE without Retry-After: %v", a.header)
	}
	if r := n.get("/readyz"); r.status != 503 || r.errCode() != "UNAVAILABLE" {
		t.Fatalf("readyz without a leader: %d %s", r.status, r.raw)
	}
	if h := n.get("/healthz"); h.status != 200 {
		t.Fatalf("healthz: %d", h.status)
	}
}

func writeDemoConfig(t *testing.T) string {
	t.Helper()
	path := t.TempDir() + "/carmy.yaml"
	writeFile(t, path, "demo_tools: true\n")
	return path
}

func TestBlackBoxRestartInterruptsAndResolves(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	n := startDev(t, bin)
	body := `{"tool":"sleep","arguments":{"ms":60000},"request_id":"across-restart"}`
	go func() {
		// The process dies under this call: its answer does not matter.
		if resp, err := http.Post(n.URL+"/v1/tools/call", "application/json", strings.NewReader(body)); err == nil {
			resp.Body.Close()
		}
	}()
	var id string
	testutil.WaitUntil(t, 15*time.Second, "the call to be recorded running", func() bool {
		a := n.get("/v1/executions?request_id=across-restart")
		id = a.str("execution_id")
		return a.status == 200 && a.str("status") == "running"
	})
	n.Kill()
	m := bbNode{n.Restart(t), t}
	m.WaitReady(t, 30*time.Second)

	// The restarted node marked its own running execution interrupted:
	// the tool does not run again, and the answer says why.
	u := m.call(body)
	bbWant(t, "retry after the restart", u, 409, "EXECUTION_UNCERTAIN")
	if u.str("error", "status") != "interrupted" || u.str("error", "execution_id") != id || u.header.Get("Retry-After") != "" {
		t.Fatalf("uncertain answer: %s %v", u.raw, u.header)
	}
	r := m.post("/v1/executions/"+id+"/resolve", `{"status":"completed","data":{"slept_ms":60000}}`)
	if r.status != 200 || r.body["resolved"] != true || r.str("status") != "completed" {
		t.Fatalf("resolve: %d %s", r.status, r.raw)
	}
	again := m.call(body)
	if again.status != 200 || again.body["replayed"] != true || again.body["resolved"] != true || again.str("execution_id") != id {
		t.Fatalf("retry after resolve: %d %s", again.status, again.raw)
	}
}
