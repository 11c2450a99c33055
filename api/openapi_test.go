package api_test

// Tests of the OpenAPI document (api/openapi.json): a real runtime served
// over HTTP, driven through every route, each request and each answer
// validated against the document with kin-openapi's openapi3filter (which
// validates OpenAPI 3.1 documents with JSON Schema 2020-12); the document's
// routes against Echo's; its error codes against the server's table; and
// proof that the validator rejects answers that break the document.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/carmyhq/carmy"
	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/api/mcp"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/metrics/prom"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/audit"
	"github.com/carmyhq/carmy/tests/testutil"
)

// undocumentedRoutes are the routes the document leaves out on purpose.
// /internal/* is node-to-node (forwarded writes and reads, joins):
// authenticated by the cluster key or node TLS rather than bearer tokens,
// spoken only by Carmy nodes, and not part of the public API (docs/api.md).
// /ui and /ui/* are the console's page and its static assets (docs/console.md),
// not API operations.
var undocumentedRoutes = map[string]bool{"/internal/*": true, "/ui": true, "/ui/*": true}

// Tokens of the test nodes.
const (
	oasAdmin   = "oas-admin-token"
	oasPlanner = "oas-planner-token" // every tool
	oasLimited = "oas-limited-token" // echo only, one record at most
)

func oasAuth() api.Auth {
	return api.Auth{
		AdminToken: oasAdmin,
		Tokens: []api.Token{
			{Principal: "planner", Secret: oasPlanner, Tools: []string{"*"}},
			{Principal: "limited", Secret: oasLimited, Tools: []string{"echo"}, MaxEntries: 1},
		},
	}
}

// oasDoc is the loaded document and a router over its operations.
type oasDoc struct {
	doc    *openapi3.T
	router routers.Router
}

func loadOpenAPI(tb testing.TB) *oasDoc {
	tb.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI())
	if err != nil {
		tb.Fatalf("loading the OpenAPI document: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		tb.Fatalf("the OpenAPI document is not valid: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() || doc.OpenAPI != "3.1.0" {
		tb.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		tb.Fatalf("routing the OpenAPI document: %v", err)
	}
	return &oasDoc{doc: doc, router: router}
}

// bearerPresent is the document's bearer scheme as a request validator
// can check it: an Authorization header with a bearer token. Whether the
// token is known is the server's business.
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	scheme, token, ok := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return errors.New("no bearer token")
	}
	return nil
}

// The audit ledger's pages are NDJSON, which the document declares as
// text: each line's form is the verifier's to check (store/audit).
func init() {
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", openapi3filter.PlainBodyDecoder)
}

func requestOptions() *openapi3filter.Options {
	return &openapi3filter.Options{AuthenticationFunc: bearerPresent, MultiError: true}
}

// responseOptions fail an answer whose status the operation does not list.
func responseOptions() *openapi3filter.Options {
	return &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
}

// schema returns a component schema.
func (d *oasDoc) schema(tb testing.TB, name string) *openapi3.Schema {
	tb.Helper()
	ref := d.doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		tb.Fatalf("the document has no schema %q", name)
	}
	return ref.Value
}

// visit validates a decoded JSON value against s as the document's
// dialect (JSON Schema 2020-12) has it.
func visit(s *openapi3.Schema, v any) error {
	return s.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors())
}

// reqWant is what the document must say of a request.
type reqWant int

const (
	// conforms: the request is one the document describes.
	conforms reqWant = iota
	// violates: the document refuses the request, as the server does.
	violates
	// unchecked: the document cannot tell (a rule between parameters, a
	// body size), so only the answer is checked.
	unchecked
)

// exchange is one request and what must come of it.
type exchange struct {
	method, path, body string
	token              string            // bearer token; "" sends none
	header             map[string]string // extra headers; "" deletes one
	req                reqWant
	status             int
	code               string // the error code of an error answer
}

// reply is an answer read in full.
type reply struct {
	status int
	header http.Header
	raw    []byte
	obj    map[string]any // the JSON object, when the answer is JSON
}

func (r reply) str(path ...string) string {
	var v any = r.obj
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// checker sends exchanges to a node and validates them against the
// document. It reports failures with Errorf only, so it may be used from
// other goroutines.
type checker struct {
	t    *testing.T
	d    *oasDoc
	base string

	mu   sync.Mutex
	seen map[string]map[int]bool // "METHOD /path" → statuses answered
}

func newChecker(t *testing.T, d *oasDoc, base string) *checker {
	return &checker{t: t, d: d, base: base, seen: make(map[string]map[int]bool)}
}

func (c *checker) newRequest(x exchange) (*http.Request, error) {
	var body io.Reader
	if x.body != "" {
		body = strings.NewReader(x.body)
	}
	req, err := http.NewRequest(x.method, c.base+x.path, body)
	if err != nil {
		return nil, err
	}
	if x.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if x.token != "" {
		req.Header.Set("Authorization", "Bearer "+x.token)
	}
	for k, v := range x.header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return req, nil
}

// do sends x, checks the request against the document as x.req says,
// checks the answer's status and code, and validates the answer against
// the operation (or, for a path or method the document does not list,
// against the error envelope).
func (c *checker) do(x exchange) reply {
	t := c.t
	t.Helper()
	what := x.method + " " + x.path
	req, err := c.newRequest(x)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return reply{}
	}
	// The request as the validator sees it: a copy with its own body.
	vreq, _ := c.newRequest(x)
	ctx := context.Background()
	route, params, routeErr := c.d.router.FindRoute(vreq)
	var input *openapi3filter.RequestValidationInput
	if routeErr == nil {
		input = &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: requestOptions()}
		verr := openapi3filter.ValidateRequest(ctx, input)
		switch {
		case x.req == conforms && verr != nil:
			t.Errorf("%s: the request does not conform to the document: %v", what, verr)
		case x.req == violates && verr == nil:
			t.Errorf("%s: the document accepts a request the server refuses (body %s)", what, x.body)
		}
	} else if x.req == conforms {
		t.Errorf("%s: the document has no such operation: %v", what, routeErr)
	}

	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return reply{}
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Errorf("%s: reading the answer: %v", what, err)
	}
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.obj); err != nil {
			t.Errorf("%s: the answer is not a JSON object: %q", what, raw)
		}
	}
	if r.status != x.status {
		t.Errorf("%s: status %d, want %d; body %s", what, r.status, x.status, raw)
	}
	if x.code != "" && r.str("error", "code") != x.code {
		t.Errorf("%s: error code %q, want %q; body %s", what, r.str("error", "code"), x.code, raw)
	}

	if r.status == http.StatusRequestHeaderFieldsTooLarge {
		// Headers over the limit: answered on every path, before
		// routing, as the HeaderFieldsTooLarge component says.
		schema := c.d.doc.Components.Responses["HeaderFieldsTooLarge"].Value.Content.Get("application/json").Schema.Value
		if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") || r.obj == nil {
			t.Errorf("%s: 431 is not JSON: %q %s", what, r.header.Get("Content-Type"), raw)
		} else if err := visit(schema, jsonValue(t, raw)); err != nil {
			t.Errorf("%s: the 431 answer does not match HeaderFieldsTooLarge: %v; body %s", what, err, raw)
		}
		return r
	}
	if routeErr != nil {
		// No operation: Echo's 404 (no such route) or 405 (wrong
		// method), which the document describes with the envelope.
		name := map[int]string{http.StatusNotFound: "Error404", http.StatusMethodNotAllowed: "Error405"}[r.status]
		if name == "" || r.obj == nil {
			t.Errorf("%s: a path or method outside the document answered %d %s", what, r.status, raw)
		} else if err := visit(c.d.schema(t, name), jsonValue(t, raw)); err != nil {
			t.Errorf("%s: the answer does not match %s: %v; body %s", what, name, err, raw)
		}
		return r
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: input,
		Status:                 r.status,
		Header:                 r.header,
		Options:                responseOptions(),
	}
	out.SetBodyBytes(raw)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		t.Errorf("%s: the answer does not match the document: %v\nstatus %d, headers %v, body %s", what, err, r.status, r.header, raw)
	}
	op := route.Method + " " + route.Path
	c.mu.Lock()
	if c.seen[op] == nil {
		c.seen[op] = make(map[int]bool)
	}
	c.seen[op][r.status] = true
	c.mu.Unlock()
	return r
}

// background runs do in a goroutine.
func (c *checker) background(x exchange) <-chan reply {
	ch := make(chan reply, 1)
	go func() { ch <- c.do(x) }()
	return ch
}

// exercised fails the test for each operation of the document that no
// exchange answered with a 2xx.
func (c *checker) exercised() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for path, item := range c.d.doc.Paths.Map() {
		for method := range item.Operations() {
			op := method + " " + path
			ok := false
			var statuses []int
			for s := range c.seen[op] {
				ok = ok || s/100 == 2
				statuses = append(statuses, s)
			}
			sort.Ints(statuses)
			if !ok {
				c.t.Errorf("%s: no exchange got a 2xx answer (statuses seen: %v)", op, statuses)
			} else {
				c.t.Logf("%s: answered %v", op, statuses)
			}
		}
	}
}

func jsonValue(tb testing.TB, raw []byte) any {
	tb.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		tb.Errorf("not JSON: %q", raw)
	}
	return v
}

// oasCluster is a cluster of a few nodes in memory: the document is about
// the answers' shape, which a real cluster's adapter fills the same way.
type oasCluster struct {
	mu    sync.Mutex
	nodes []api.ClusterNode
}

func newOASCluster() *oasCluster {
	return &oasCluster{nodes: []api.ClusterNode{
		{ID: "node1", RaftAddr: "127.0.0.1:8300", HTTPAddr: "127.0.0.1:8080", Suffrage: "voter", Gossip: "alive"},
		{ID: "node2", RaftAddr: "127.0.0.1:8310", HTTPAddr: "127.0.0.1:8090", Suffrage: "voter", Gossip: "suspect"},
	}}
}

func (c *oasCluster) Status(context.Context) (api.ClusterStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return api.ClusterStatus{
		Leader:      &api.ClusterLeader{ID: "node1", HTTPAddr: "127.0.0.1:8080"},
		Nodes:       slices.Clone(c.nodes),
		CommitIndex: 42, AppliedIndex: 42, Entries: 7, Capacity: 100000,
	}, nil
}

func (c *oasCluster) AddNode(_ context.Context, n api.NodeSpec) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, old := range c.nodes {
		if old.ID == n.ID {
			c.nodes[i].RaftAddr, c.nodes[i].HTTPAddr = n.RaftAddr, n.HTTPAddr
			return nil
		}
	}
	c.nodes = append(c.nodes, api.ClusterNode{ID: n.ID, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr, Suffrage: "voter", Gossip: "unknown"})
	return nil
}

func (c *oasCluster) RemoveNode(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.nodes {
		if n.ID == id {
			c.nodes = slices.Delete(c.nodes, i, i+1)
			return nil
		}
	}
	return fmt.Errorf("no member %q: %w", id, store.ErrNotFound)
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// startOASNode serves a real runtime with the demo tools (and extra) on a
// loopback port until the test ends, and returns it with its base URL once
// it is ready.
func startOASNode(t *testing.T, cfg api.Config, extra ...carmy.ToolSpec) (*carmy.Runtime, string) {
	t.Helper()
	app := carmy.App(carmy.WithLogger(quietLogger()), carmy.WithDrainTimeout(time.Second))
	if err := app.AddDemoTools(); err != nil {
		t.Fatal(err)
	}
	for _, spec := range extra {
		if err := app.AddTool(spec); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Logger = quietLogger()
	return app, "http://" + testutil.Serve(t, app, cfg)
}

// blockTool runs until unblock is closed or its context ends, and says on
// started that it runs.
// gatedTool needs the approval of "limited" (or the admin) before it
// runs.
func gatedTool() carmy.ToolSpec {
	return carmy.ToolSpec{
		Name:     "gated",
		Approval: &engine.Approval{Approvers: []string{"limited"}},
		Func: func(ctx context.Context, call carmy.Call) (any, error) {
			return map[string]any{"paid": true}, nil
		},
	}
}

func blockTool(started chan<- string, unblock <-chan struct{}) carmy.ToolSpec {
	return carmy.ToolSpec{
		Name:        "block",
		Description: "Runs until the test lets it go or its context ends.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
		Timeout:     time.Minute,
		Func: func(ctx context.Context, call carmy.Call) (any, error) {
			select {
			case started <- string(call.Arguments):
			default: // nobody waits: never block the tool on it
			}
			select {
			case <-unblock:
				return map[string]any{"unblocked": true}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	}
}

func waitStarted(t *testing.T, started <-chan string) {
	t.Helper()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the block tool did not start within 10 s")
	}
}

func waitReply(t *testing.T, ch <-chan reply) reply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no answer within 20 s")
		return reply{}
	}
}

// TestOpenAPIConformance drives a real runtime (carmy.App with the demo
// tools, served by Runtime.Serve with auth on) through every route of the
// document, successes and errors, and validates every request and every
// answer against the document.
func TestOpenAPIConformance(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	started, unblock := make(chan string, 8), make(chan struct{})
	var unblockOnce sync.Once
	release := func() { unblockOnce.Do(func() { close(unblock) }) }
	t.Cleanup(release)
	ledger := fakeLedger{head: audit.Head{Seq: 1, Hash: audit.Genesis}, export: func(w io.Writer, _ uint64, _ int) error {
		_, err := io.WriteString(w, `{"checkpoint":{"hash":"`+audit.Genesis+`","seq":1}}`+"\n")
		return err
	}}
	app, base := startOASNode(t, api.Config{Auth: oasAuth(), Cluster: newOASCluster(), Ledger: ledger, BodyLimit: 64 << 10, Pprof: true},
		blockTool(started, unblock), gatedTool())
	c := newChecker(t, d, base)
	const call = "/v1/tools/call"
	post := func(token, path, body string, status int, code string, req reqWant) reply {
		t.Helper()
		return c.do(exchange{method: http.MethodPost, path: path, body: body, token: token, status: status, code: code, req: req})
	}
	get := func(token, path string, status int, code string, req reqWant) reply {
		t.Helper()
		return c.do(exchange{method: http.MethodGet, path: path, token: token, status: status, code: code, req: req})
	}

	// Operations.
	get("", "/healthz", 200, "", conforms)
	get("", "/readyz", 200, "", conforms)
	get("", "/metrics", 200, "", conforms)
	get("", "/openapi.json", 200, "", conforms)

	// Tools.
	tools := get(oasPlanner, "/v1/tools", 200, "", conforms)
	if list, _ := tools.obj["tools"].([]any); len(list) != 7 {
		t.Errorf("planner sees %d tools, want the 5 demo tools, block and gated: %s", len(list), tools.raw)
	}
	if list, _ := get(oasLimited, "/v1/tools", 200, "", conforms).obj["tools"].([]any); len(list) != 1 {
		t.Errorf("limited sees %d tools, want echo only", len(list))
	}
	get("", "/v1/tools", 401, "UNAUTHORIZED", violates)
	get("not-a-token", "/v1/tools", 401, "UNAUTHORIZED", conforms)

	// A call, its replay, a conflict.
	first := `{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"oas-1","session_id":"oas-s","metadata":{"agent":"planner"},"timeout_ms":5000}`
	ran := post(oasPlanner, call, first, 200, "", conforms)
	if ran.obj["replayed"] != false || ran.str("status") != "completed" {
		t.Errorf("first call: %s", ran.raw)
	}
	execID := ran.str("execution_id")
	replay := post(oasPlanner, call, `{"request_id":"oas-1","session_id":"oas-s","metadata":{"agent":"planner"},"tool":"create_order","arguments":{"sku":"KB-01"}}`, 200, "", conforms)
	if replay.obj["replayed"] != true || replay.header.Get("Idempotent-Replayed") != "true" || replay.str("execution_id") != execID {
		t.Errorf("replay: %v %s", replay.header, replay.raw)
	}
	conflict := post(oasPlanner, call, `{"tool":"create_order","arguments":{"sku":"KB-02"},"request_id":"oas-1","session_id":"oas-s"}`, 409, "IDEMPOTENCY_CONFLICT", conforms)
	if conflict.str("error", "execution_id") != execID {
		t.Errorf("conflict names %q, want %s", conflict.str("error", "execution_id"), execID)
	}
	// The Idempotency-Key header in place of request_id.
	c.do(exchange{method: http.MethodPost, path: call, body: `{"tool":"echo","arguments":{"a":1},"session_id":"oas-s"}`, token: oasPlanner,
		header: map[string]string{"Idempotency-Key": "oas-key-1"}, status: 200, req: conforms})
	c.do(exchange{method: http.MethodPost, path: call, body: `{"tool":"echo","request_id":"oas-other"}`, token: oasPlanner,
		header: map[string]string{"Idempotency-Key": "oas-key-1"}, status: 400, code: "INVALID_REQUEST", req: unchecked})
	// Failed and timed-out outcomes; nulls read as absent.
	if r := post(oasPlanner, call, `{"tool":"fail","arguments":{"message":"no stock"},"request_id":"oas-fail","session_id":"oas-s"}`, 200, "", conforms); r.str("status") != "failed" {
		t.Errorf("fail: %s", r.raw)
	}
	if r := post(oasPlanner, call, `{"tool":"sleep","arguments":{"ms":5000},"request_id":"oas-slow","session_id":"oas-s","timeout_ms":50}`, 200, "", conforms); r.str("status") != "timed_out" {
		t.Errorf("sleep past its timeout: %s", r.raw)
	}
	post(oasPlanner, call, `{"tool":"echo","arguments":null,"request_id":"oas-null","session_id":null,"metadata":null,"timeout_ms":null}`, 200, "", conforms)
	// A call without request_id: an execution_id, but no record.
	unrecorded := post(oasPlanner, call, `{"tool":"create_order","arguments":{"sku":"KB-09"}}`, 200, "", conforms)
	get(oasPlanner, "/v1/executions/"+unrecorded.str("execution_id"), 404, "NOT_FOUND", conforms)

	// Bad calls: the document refuses what the server refuses.
	for _, bad := range []struct{ body, field string }{
		{`{"tool":"echo","requestId":"oas-typo"}`, "requestId"},
		{`{"tool":"echo","request_id":""}`, "request_id"},
		{`{"tool":"echo","request_id":"has space"}`, "request_id"},
		{`{"tool":"echo","request_id":"` + strings.Repeat("r", 256) + `"}`, "request_id"},
		{`{"tool":"echo","session_id":"tab\there"}`, "session_id"},
		{`{"tool":"echo","timeout_ms":0}`, "timeout_ms"},
		{`{"tool":"echo","timeout_ms":1.5}`, "timeout_ms"},
		{`{"tool":"echo","arguments":[1]}`, "arguments"},
		{`{"tool":"echo","metadata":"x"}`, "metadata"},
		{`{"arguments":{}}`, "tool"},
		{`{"tool":""}`, "tool"},
		{`{"tool":7}`, "tool"},
		{`{"tool":"create_order","arguments":{}}`, "arguments"}, // the tool's input_schema: the document only says "an object"
		{`{"tool":"echo"`, ""},
		{`[]`, ""},
	} {
		want := violates
		if strings.Contains(bad.body, `"create_order"`) {
			want = unchecked
		}
		r := post(oasPlanner, call, bad.body, 400, "INVALID_REQUEST", want)
		if bad.field != "" && !strings.HasPrefix(r.str("error", "field"), bad.field) {
			t.Errorf("%s: field %q, want %q", bad.body, r.str("error", "field"), bad.field)
		}
	}
	post(oasPlanner, call, `{"tool":"no_such_tool"}`, 404, "UNKNOWN_TOOL", conforms)
	post("", call, `{"tool":"echo"}`, 401, "UNAUTHORIZED", violates)
	post(oasLimited, call, `{"tool":"create_order","arguments":{"sku":"KB-01"}}`, 403, "FORBIDDEN", conforms)
	c.do(exchange{method: http.MethodPost, path: call, body: `{"tool":"echo"}`, token: oasPlanner,
		header: map[string]string{"Content-Type": "text/plain"}, status: 415, code: "UNSUPPORTED_MEDIA_TYPE", req: violates})
	post(oasPlanner, call, `{"tool":"echo","arguments":{"pad":"`+strings.Repeat("x", 70<<10)+`"}}`, 413, "PAYLOAD_TOO_LARGE", unchecked)
	// A principal's quota: one record, then fail closed.
	post(oasLimited, call, `{"tool":"echo","request_id":"oas-q1"}`, 200, "", conforms)
	if r := post(oasLimited, call, `{"tool":"echo","request_id":"oas-q2"}`, 503, "IDEMPOTENCY_CAPACITY", conforms); r.str("error", "principal") != "limited" {
		t.Errorf("quota answer: %s", r.raw)
	}

	// Executions: get, lookup, listing.
	rec := get(oasPlanner, "/v1/executions/"+execID, 200, "", conforms)
	if rec.str("fingerprint") == "" || rec.obj["resolved"] != false {
		t.Errorf("record: %s", rec.raw)
	}
	get(oasAdmin, "/v1/executions/"+execID, 200, "", conforms)
	get(oasLimited, "/v1/executions/"+execID, 404, "NOT_FOUND", conforms)
	get(oasPlanner, "/v1/executions/exec_NOSUCHEXECUTION", 404, "NOT_FOUND", conforms)
	get("", "/v1/executions/"+execID, 401, "UNAUTHORIZED", violates)
	get(oasPlanner, "/v1/executions?request_id=oas-1&session_id=oas-s", 200, "", conforms)
	get(oasPlanner, "/v1/executions?request_id=oas-1", 404, "NOT_FOUND", conforms)
	// A ';' would make net/http drop the pair (a lookup read as a listing):
	// the document's validator reads the query as net/http does, so only
	// the answer is checked.
	if r := get(oasPlanner, "/v1/executions?request_id=oas-1;session_id=oas-s", 400, "INVALID_REQUEST", unchecked); r.str("error", "field") != "request_id" {
		t.Errorf("';' in the query: %s", r.raw)
	}
	page := get(oasPlanner, "/v1/executions?session_id=oas-s&limit=2", 200, "", conforms)
	cursor := page.str("next_cursor")
	if execs, _ := page.obj["executions"].([]any); len(execs) != 2 || cursor == "" {
		t.Fatalf("first page: %s", page.raw)
	}
	get(oasPlanner, "/v1/executions?session_id=oas-s&limit=2&cursor="+url.QueryEscape(cursor), 200, "", conforms)
	get(oasAdmin, "/v1/executions?session_id=oas-s", 200, "", conforms)
	get(oasPlanner, "/v1/executions", 200, "", conforms)
	get(oasPlanner, "/v1/executions?session_id=oas-s&limit=0", 400, "INVALID_REQUEST", violates)
	get(oasPlanner, "/v1/executions?session_id=oas-s&limit=501", 400, "INVALID_REQUEST", violates)
	get(oasPlanner, "/v1/executions?session_id=oas-s&cursor=0", 400, "INVALID_REQUEST", violates)
	get(oasPlanner, "/v1/executions?request_id=oas-1&limit=1", 400, "INVALID_REQUEST", unchecked)
	if r := get(oasPlanner, "/v1/executions?requestId=oas-1", 400, "INVALID_REQUEST", unchecked); r.str("error", "field") != "requestId" {
		t.Errorf("unknown query parameter: %s", r.raw)
	}
	// The listing's filters: every session, statuses, a tool, a principal,
	// attention; an admin without session_id lists every session.
	if r := get(oasPlanner, "/v1/executions?all_sessions=true&status=completed,failed&tool=fail", 200, "", conforms); !bytes.Contains(r.raw, []byte(`"oas-fail"`)) || bytes.Contains(r.raw, []byte(`"oas-1"`)) {
		t.Errorf("status and tool filters: %s", r.raw)
	}
	get(oasPlanner, "/v1/executions?all_sessions=true&principal=planner&attention=false&status=running", 200, "", conforms)
	get(oasPlanner, "/v1/executions?session_id=oas-s&all_sessions=false&limit=1", 200, "", conforms)
	get(oasAdmin, "/v1/executions?principal=planner&attention=true&limit=1", 200, "", conforms)
	if r := get(oasAdmin, "/v1/executions?principal=planner&tool=create_order", 200, "", conforms); !bytes.Contains(r.raw, []byte(`"oas-1"`)) {
		t.Errorf("the admin without session_id lists every session: %s", r.raw)
	}
	if r := get(oasPlanner, "/v1/executions?status=completed,bogus", 400, "INVALID_REQUEST", violates); r.str("error", "field") != "status" || !strings.Contains(r.str("error", "message"), "bogus") {
		t.Errorf("unknown status: %s", r.raw)
	}
	get(oasPlanner, "/v1/executions?principal=limited", 403, "FORBIDDEN", conforms)
	get(oasPlanner, "/v1/executions?attention=1", 400, "INVALID_REQUEST", violates)
	get(oasPlanner, "/v1/executions?tool=", 400, "INVALID_REQUEST", violates)
	if r := get(oasPlanner, "/v1/executions?all_sessions=true&session_id=oas-s", 400, "INVALID_REQUEST", unchecked); r.str("error", "field") != "all_sessions" {
		t.Errorf("all_sessions with session_id: %s", r.raw)
	}
	get(oasPlanner, "/v1/executions?request_id=oas-1&status=completed", 400, "INVALID_REQUEST", unchecked)

	// This node's activity (admin): the calls above are in its last steps.
	get(oasPlanner, "/v1/activity", 403, "FORBIDDEN", conforms)
	get("", "/v1/activity", 401, "UNAUTHORIZED", violates)
	if r := get(oasAdmin, "/v1/activity", 200, "", conforms); !bytes.Contains(r.raw, []byte(`"fresh":`)) {
		t.Errorf("activity: %s", r.raw)
	}
	get(oasAdmin, "/v1/activity?window=60", 400, "INVALID_REQUEST", unchecked)

	// Approval gates: a gated call awaits (202, every retry alike); its
	// own principal may not decide; an approver approves it (the tool
	// runs) or the admin denies another; a second decision is 409.
	gatedCall := func(rid string) string {
		return `{"tool":"gated","arguments":{"amount":5},"request_id":"` + rid + `","session_id":"oas-g"}`
	}
	post(oasPlanner, call, `{"tool":"gated","arguments":{"amount":5}}`, 400, "INVALID_REQUEST", unchecked)
	pending := post(oasPlanner, call, gatedCall("oas-g1"), 202, "", conforms)
	g1 := pending.str("execution_id")
	if pending.str("status") != "awaiting_approval" {
		t.Errorf("gated call: %s", pending.raw)
	}
	if r := post(oasPlanner, call, gatedCall("oas-g1"), 202, "", conforms); r.str("execution_id") != g1 {
		t.Errorf("retry of a gated call: %s", r.raw)
	}
	get(oasPlanner, "/v1/executions/"+g1, 200, "", conforms)
	post(oasPlanner, "/v1/executions/"+g1+"/approve", "", 403, "FORBIDDEN", conforms)
	post(oasLimited, "/v1/executions/"+g1+"/approve", `{"why":"x"}`, 400, "INVALID_REQUEST", violates)
	if r := post(oasLimited, "/v1/executions/"+g1+"/approve", `{"reason":"fine"}`, 200, "", conforms); r.str("status") != "completed" {
		t.Errorf("approve: %s", r.raw)
	}
	if r := post(oasLimited, "/v1/executions/"+g1+"/deny", "", 409, "INVALID_STATE", conforms); r.str("error", "status") != "completed" {
		t.Errorf("deny after approve: %s", r.raw)
	}
	if r := post(oasPlanner, call, gatedCall("oas-g1"), 200, "", conforms); r.obj["replayed"] != true || r.str("status") != "completed" {
		t.Errorf("replay after approval: %s", r.raw)
	}
	g2 := post(oasPlanner, call, gatedCall("oas-g2"), 202, "", conforms).str("execution_id")
	if r := post(oasAdmin, "/v1/executions/"+g2+"/deny", `{"reason":"no"}`, 200, "", conforms); r.str("status") != "denied" {
		t.Errorf("deny: %s", r.raw)
	}
	if r := post(oasPlanner, call, gatedCall("oas-g2"), 200, "", conforms); r.str("status") != "denied" || r.str("error", "code") != "APPROVAL_DENIED" {
		t.Errorf("replay after denial: %s", r.raw)
	}
	post(oasAdmin, "/v1/executions/exec_NOSUCHEXECUTION/approve", "", 404, "NOT_FOUND", conforms)

	// A running execution: uncertain to a retry, then cancelled.
	blockCall := func(rid, args string) exchange {
		return exchange{method: http.MethodPost, path: call, token: oasPlanner, status: 200, req: conforms,
			body: `{"tool":"block","arguments":` + args + `,"request_id":"` + rid + `","session_id":"oas-b"}`}
	}
	running := c.background(blockCall("oas-b1", `{"n":1}`))
	waitStarted(t, started)
	uncertain := c.do(exchange{method: http.MethodPost, path: call, token: oasPlanner, body: blockCall("oas-b1", `{"n":1}`).body,
		status: 409, code: "EXECUTION_UNCERTAIN", req: conforms})
	if uncertain.str("error", "status") != "running" || uncertain.header.Get("Retry-After") == "" {
		t.Errorf("uncertain while running: %v %s", uncertain.header, uncertain.raw)
	}
	b1 := uncertain.str("error", "execution_id")
	if r := get(oasPlanner, "/v1/executions?request_id=oas-b1&session_id=oas-b", 200, "", conforms); r.str("status") != "running" {
		t.Errorf("lookup of a running execution: %s", r.raw)
	}
	post(oasPlanner, "/v1/executions/"+b1+"/cancel", `{"x":1}`, 400, "INVALID_REQUEST", violates)
	if r := post(oasPlanner, "/v1/executions/"+b1+"/cancel", "", 200, "", conforms); r.str("status") != "cancelled" {
		t.Errorf("cancel: %s", r.raw)
	}
	if r := waitReply(t, running); r.str("status") != "cancelled" {
		t.Errorf("the cancelled call answered %s", r.raw)
	}
	if r := post(oasPlanner, "/v1/executions/"+b1+"/cancel", `{}`, 409, "INVALID_STATE", conforms); r.str("error", "status") != "cancelled" {
		t.Errorf("cancel of a cancelled execution: %s", r.raw)
	}
	post(oasPlanner, "/v1/executions/exec_NOSUCHEXECUTION/cancel", "", 404, "NOT_FOUND", conforms)
	post(oasPlanner, "/v1/executions/"+execID+"/resolve", `{"status":"released"}`, 409, "INVALID_STATE", conforms)

	// Interrupted executions (as after a restart): uncertain, not
	// cancellable, then resolved three ways.
	b2 := c.background(blockCall("oas-b2", `{"n":2}`))
	// b3 will be released while its tool runs: its caller is told so.
	x3 := blockCall("oas-b3", `{"n":3}`)
	x3.status, x3.code = 409, "INVALID_STATE"
	b3 := c.background(x3)
	b4 := c.background(blockCall("oas-b4", `{"n":4}`))
	for range 3 {
		waitStarted(t, started)
	}
	if n, err := app.Store().MarkInterrupted(context.Background(), app.Config().NodeID); err != nil || n != 3 {
		t.Fatalf("MarkInterrupted = %d, %v; want 3", n, err)
	}
	ids := map[string]string{}
	for _, rid := range []string{"oas-b2", "oas-b3", "oas-b4"} {
		r := get(oasPlanner, "/v1/executions?request_id="+rid+"&session_id=oas-b", 200, "", conforms)
		if r.str("status") != "interrupted" {
			t.Errorf("%s: %s", rid, r.raw)
		}
		ids[rid] = r.str("execution_id")
	}
	if r := c.do(exchange{method: http.MethodPost, path: call, token: oasPlanner, body: blockCall("oas-b2", `{"n":2}`).body,
		status: 409, code: "EXECUTION_UNCERTAIN", req: conforms}); r.str("error", "status") != "interrupted" {
		t.Errorf("uncertain while interrupted: %s", r.raw)
	}
	post(oasPlanner, "/v1/executions/"+ids["oas-b2"]+"/cancel", "", 409, "INVALID_STATE", conforms)
	for _, bad := range []string{
		`{"status":"bogus"}`,
		`{"status":"completed"}`,
		`{"status":"completed","data":1,"error":{"code":"X"}}`,
		`{"status":"failed"}`,
		`{"status":"failed","error":{"message":"no code"}}`,
		`{"status":"failed","data":1,"error":{"code":"X"}}`,
		`{"status":"released","data":1}`,
		`{"data":1}`,
		`{"status":"released","extra":1}`,
	} {
		post(oasPlanner, "/v1/executions/"+ids["oas-b2"]+"/resolve", bad, 400, "INVALID_REQUEST", violates)
	}
	post(oasPlanner, "/v1/executions/"+ids["oas-b2"]+"/resolve", "", 400, "INVALID_REQUEST", violates)
	post(oasPlanner, "/v1/executions/exec_NOSUCHEXECUTION/resolve", `{"status":"released"}`, 404, "NOT_FOUND", conforms)
	if r := post(oasPlanner, "/v1/executions/"+ids["oas-b2"]+"/resolve", `{"status":"completed","data":{"order_id":99}}`, 200, "", conforms); r.obj["resolved"] != true {
		t.Errorf("resolve completed: %s", r.raw)
	}
	if r := post(oasPlanner, "/v1/executions/"+ids["oas-b3"]+"/resolve", `{"status":"released","error":null}`, 200, "", conforms); r.obj["released"] != true {
		t.Errorf("resolve released: %s", r.raw)
	}
	if r := post(oasPlanner, "/v1/executions/"+ids["oas-b4"]+"/resolve", `{"status":"failed","error":{"code":"MANUAL_CHECK","message":"the order exists","ticket":7}}`, 200, "", conforms); r.str("status") != "failed" {
		t.Errorf("resolve failed: %s", r.raw)
	}
	if r := post(oasPlanner, call, blockCall("oas-b2", `{"n":2}`).body, 200, "", conforms); r.obj["replayed"] != true || r.obj["resolved"] != true {
		t.Errorf("replay of a resolved execution: %s", r.raw)
	}
	// The runners finish: the resolved ones answer the record as it
	// stands; the released one's outcome belongs to nobody.
	release()
	if r := waitReply(t, b2); r.obj["resolved"] != true || r.str("status") != "completed" {
		t.Errorf("the resolved call answered %s", r.raw)
	}
	if r := waitReply(t, b4); r.obj["resolved"] != true || r.str("status") != "failed" {
		t.Errorf("the resolved call answered %s", r.raw)
	}
	if r := waitReply(t, b3); r.str("error", "status") != "released" || r.str("error", "execution_id") != ids["oas-b3"] {
		t.Errorf("the released call answered %s", r.raw)
	}
	// The next retry of a released identity runs the tool again.
	if r := post(oasPlanner, call, blockCall("oas-b3", `{"n":3}`).body, 200, "", conforms); r.obj["replayed"] != false || r.str("status") != "completed" {
		t.Errorf("retry after release: %s", r.raw)
	}

	// MCP (docs/mcp.md): a JSON-RPC request, a notification, no token, a
	// body that is not JSON-RPC; the metadata document.
	mcpHeaders := map[string]string{"Accept": "application/json, text/event-stream"}
	mcpPost := func(token, body string, status int, req reqWant) reply {
		t.Helper()
		return c.do(exchange{method: http.MethodPost, path: "/mcp", body: body, token: token, header: mcpHeaders, status: status, req: req})
	}
	mcpPost(oasPlanner, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"oas","version":"1"}}}`, 200, conforms)
	mcpPost(oasPlanner, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, conforms)
	if r := mcpPost(oasLimited, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 200, conforms); !bytes.Contains(r.raw, []byte(`"name":"echo"`)) || bytes.Contains(r.raw, []byte(`"name":"create_order"`)) {
		t.Errorf("tools/list of limited: %s", r.raw)
	}
	if r := mcpPost("", `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, 401, violates); !strings.Contains(r.header.Get("WWW-Authenticate"), `resource_metadata="`+base+`/.well-known/oauth-protected-resource"`) {
		t.Errorf("401 at /mcp: WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
	}
	mcpPost(oasPlanner, `{"jsonrpc":"2.0",`, 400, violates)
	get("", "/.well-known/oauth-protected-resource", 200, "", conforms)
	if r := get("", "/.well-known/oauth-protected-resource/mcp", 200, "", conforms); r.str("resource") != base+"/mcp" {
		t.Errorf("metadata document: %s", r.raw)
	}

	// Cluster administration.
	get(oasPlanner, "/v1/cluster", 403, "FORBIDDEN", conforms)
	get("", "/v1/cluster", 401, "UNAUTHORIZED", violates)
	get(oasAdmin, "/v1/cluster", 200, "", conforms)
	get(oasAdmin, "/v1/audit?after=1&limit=5", 200, "", conforms)
	get(oasAdmin, "/v1/audit?limit=0", 400, "INVALID_REQUEST", violates)
	get(oasPlanner, "/v1/audit", 403, "FORBIDDEN", conforms)
	get("", "/v1/audit/head", 401, "UNAUTHORIZED", violates)
	get(oasAdmin, "/v1/audit/head", 200, "", conforms)
	post(oasAdmin, "/v1/cluster/nodes", `{"id":"node3","raft_addr":"127.0.0.1:8320","http_addr":"127.0.0.1:8100"}`, 200, "", conforms)
	post(oasAdmin, "/v1/cluster/nodes", `{"id":"node3","raft_addr":"127.0.0.1:8320","http_addr":"127.0.0.1:8100"}`, 200, "", conforms)
	if r := post(oasAdmin, "/v1/cluster/nodes", `{"id":"node4","http_addr":"127.0.0.1:8110"}`, 400, "INVALID_REQUEST", violates); r.str("error", "field") != "raft_addr" {
		t.Errorf("add without raft_addr: %s", r.raw)
	}
	post(oasAdmin, "/v1/cluster/nodes", `{"id":"node4","raft_addr":"x","http_addr":"y","gossip_addr":"z"}`, 400, "INVALID_REQUEST", violates)
	post(oasPlanner, "/v1/cluster/nodes", `{"id":"node4","raft_addr":"x","http_addr":"y"}`, 403, "FORBIDDEN", conforms)
	c.do(exchange{method: http.MethodDelete, path: "/v1/cluster/nodes/node3", token: oasAdmin, status: 200, req: conforms})
	c.do(exchange{method: http.MethodDelete, path: "/v1/cluster/nodes/node9", token: oasAdmin, status: 404, code: "NOT_FOUND", req: conforms})
	c.do(exchange{method: http.MethodDelete, path: "/v1/cluster/nodes/node2", token: oasPlanner, status: 403, code: "FORBIDDEN", req: conforms})

	// Profiles (admin).
	get(oasAdmin, "/debug/pprof/", 200, "", conforms)
	get(oasPlanner, "/debug/pprof/", 403, "FORBIDDEN", conforms)
	get("", "/debug/pprof/heap", 401, "UNAUTHORIZED", violates)
	get(oasAdmin, "/debug/pprof/cmdline", 200, "", conforms)
	get(oasAdmin, "/debug/pprof/symbol", 200, "", conforms)
	get(oasAdmin, "/debug/pprof/heap?debug=1", 200, "", conforms)
	get(oasAdmin, "/debug/pprof/goroutine", 200, "", conforms)
	get(oasAdmin, "/debug/pprof/no_such_profile", 404, "NOT_FOUND", conforms)
	get(oasAdmin, "/debug/pprof/heap?seconds=x", 400, "INVALID_REQUEST", violates)
	get(oasAdmin, "/debug/pprof/profile?seconds=-1", 400, "INVALID_REQUEST", violates)
	get(oasAdmin, "/debug/pprof/trace?seconds=0", 400, "INVALID_REQUEST", violates)
	get(oasAdmin, "/debug/pprof/trace?seconds=0.05", 200, "", conforms)
	get(oasAdmin, "/debug/pprof/profile?seconds=1", 200, "", conforms)

	// Paths and methods outside the document: Echo's 404 and 405.
	get(oasPlanner, "/v1/nope", 404, "NOT_FOUND", violates)
	c.do(exchange{method: http.MethodPut, path: "/v1/tools", token: oasPlanner, status: 405, code: "METHOD_NOT_ALLOWED", req: violates})
	c.do(exchange{method: http.MethodGet, path: call, token: oasPlanner, status: 405, code: "METHOD_NOT_ALLOWED", req: violates})
	// Headers over the limit (64 KiB): refused by the API a little over
	// it, by net/http (its answer replaced) far over it; both 431.
	for _, pad := range []int{80 << 10, 200 << 10} {
		c.do(exchange{method: http.MethodGet, path: "/v1/tools", token: oasPlanner, header: map[string]string{"X-Padding": strings.Repeat("p", pad)},
			status: 431, code: "INVALID_REQUEST", req: unchecked})
	}

	c.exercised()
}

// TestOpenAPIConformanceLoneNode drives a real node without a cluster and
// with a tight rate limit: the cluster routes' 404, RATE_LIMITED, and a
// node that shuts down (readyz and calls UNAVAILABLE).
func TestOpenAPIConformanceLoneNode(t *testing.T) {
	d := loadOpenAPI(t)
	app, base := startOASNode(t, api.Config{Auth: oasAuth(), RateLimit: api.RateLimit{PerSecond: 0.001, Burst: 1}})
	c := newChecker(t, d, base)

	// No cluster: 404 NOT_FOUND (the admin is not rate-limited).
	c.do(exchange{method: http.MethodGet, path: "/v1/cluster", token: oasAdmin, status: 404, code: "NOT_FOUND", req: conforms})
	c.do(exchange{method: http.MethodPost, path: "/v1/cluster/nodes", token: oasAdmin, body: `{"id":"n2","raft_addr":"a:1","http_addr":"a:2"}`,
		status: 404, code: "NOT_FOUND", req: conforms})
	c.do(exchange{method: http.MethodDelete, path: "/v1/cluster/nodes/n2", token: oasAdmin, status: 404, code: "NOT_FOUND", req: conforms})

	// One request per principal, then 429 with Retry-After and the principal.
	c.do(exchange{method: http.MethodGet, path: "/v1/tools", token: oasPlanner, status: 200, req: conforms})
	for _, x := range []exchange{
		{method: http.MethodGet, path: "/v1/tools", token: oasPlanner},
		{method: http.MethodPost, path: "/v1/tools/call", token: oasPlanner, body: `{"tool":"echo","request_id":"rl-1"}`},
		{method: http.MethodGet, path: "/v1/executions?session_id=s", token: oasPlanner},
		{method: http.MethodPost, path: "/v1/executions/exec_X/cancel", token: oasPlanner},
	} {
		x.status, x.code, x.req = 429, "RATE_LIMITED", conforms
		if r := c.do(x); r.str("error", "principal") != "planner" {
			t.Errorf("%s %s: %s", x.method, x.path, r.raw)
		}
	}

	// Shutting down: not ready, and calls fail closed.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.do(exchange{method: http.MethodGet, path: "/readyz", status: 503, code: "UNAVAILABLE", req: conforms})
	c.do(exchange{method: http.MethodPost, path: "/v1/tools/call", token: oasLimited, body: `{"tool":"echo","request_id":"late"}`,
		status: 503, code: "UNAVAILABLE", req: conforms})
	c.do(exchange{method: http.MethodGet, path: "/healthz", status: 200, req: conforms})
}

// TestOpenAPIConformanceAuthFailures drives a node whose /metrics needs a
// token and whose limit on failed authentication is one a minute: the
// 401, 403 and 429 of /metrics, and the 429 of an address over its
// failures on every kind of route that needs a token.
func TestOpenAPIConformanceAuthFailures(t *testing.T) {
	d := loadOpenAPI(t)
	const metricsToken = "oas-metrics-token"
	auth := oasAuth()
	auth.MetricsToken = metricsToken
	_, base := startOASNode(t, api.Config{Auth: auth, Cluster: newOASCluster(), AuthFailures: api.AuthFailures{PerMinute: 1}, Pprof: true})
	c := newChecker(t, d, base)
	get := func(token, path string, status int, code string, req reqWant) reply {
		t.Helper()
		return c.do(exchange{method: http.MethodGet, path: path, token: token, status: status, code: code, req: req})
	}
	get(metricsToken, "/metrics", 200, "", conforms)
	get(oasAdmin, "/metrics", 200, "", conforms)
	get("", "/metrics", 401, "UNAUTHORIZED", conforms) // the document cannot tell whether a token is configured
	get(oasPlanner, "/metrics", 403, "FORBIDDEN", conforms)
	// One failure, then a wrong token from this address is refused
	// everywhere a token is needed; the right one is still served.
	get("oas-wrong-token", "/v1/tools", 401, "UNAUTHORIZED", conforms)
	for _, x := range []exchange{
		{method: http.MethodGet, path: "/v1/tools", token: oasPlanner},
		{method: http.MethodPost, path: "/v1/tools/call", token: oasPlanner, body: `{"tool":"echo"}`},
		{method: http.MethodGet, path: "/v1/cluster", token: oasAdmin},
		{method: http.MethodGet, path: "/debug/pprof/", token: oasAdmin},
		{method: http.MethodGet, path: "/metrics", token: metricsToken},
	} {
		right := x
		x.token, x.status, x.code, x.req = "oas-wrong-token", 429, "RATE_LIMITED", conforms
		if r := c.do(x); r.str("error", "source") != "127.0.0.1" || r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s: %v %s", x.method, x.path, r.header, r.raw)
		}
		right.status, right.req = 200, conforms
		c.do(right)
	}
	get("", "/healthz", 200, "", conforms)
}

// TestOpenAPIConformanceInternalError checks the INTERNAL answer of a
// runtime that panics (a fake one: a real runtime has no such bug to show).
func TestOpenAPIConformanceInternalError(t *testing.T) {
	d := loadOpenAPI(t)
	srv := newTestServer(t, &fakeRuntime{tb: t, call: func(context.Context, engine.Caller, engine.Request) (engine.Response, error) {
		panic("boom")
	}}, api.Config{Logger: quietLogger()})
	c := newChecker(t, d, srv.URL)
	// Auth is off on this server: the token is the document's, ignored.
	c.do(exchange{method: http.MethodPost, path: "/v1/tools/call", token: "any", body: `{"tool":"echo"}`, status: 500, code: "INTERNAL", req: conforms})
}

// echoPath turns an Echo route path into the document's form:
// /v1/executions/:id → /v1/executions/{id}.
var echoParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

func echoPath(p string) string { return echoParam.ReplaceAllString(p, "{$1}") }

// TestOpenAPICoversEveryRoute checks that every route the server
// registers with Echo is in the document and every operation of the
// document is registered, except undocumentedRoutes.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	d := loadOpenAPI(t)
	s, err := api.New(carmy.App(carmy.WithLogger(quietLogger())).Engine(), api.Config{
		Logger: quietLogger(), Cluster: newOASCluster(), Peer: http.NotFoundHandler(), Pprof: true, Metrics: prom.New(nil), MCP: mcp.Endpoint,
	})
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	excluded := 0
	for _, r := range api.RoutesOf(s) {
		if undocumentedRoutes[r.Path] {
			excluded++
			continue
		}
		registered[r.Method+" "+echoPath(r.Path)] = true
	}
	if excluded == 0 {
		t.Errorf("no route matched %v: update undocumentedRoutes", undocumentedRoutes)
	}
	documented := map[string]bool{}
	for path, item := range d.doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	for r := range registered {
		if !documented[r] {
			t.Errorf("route %s is registered but not in api/openapi.json", r)
		}
	}
	for op := range documented {
		if !registered[op] {
			t.Errorf("operation %s is in api/openapi.json but not registered", op)
		}
	}
	if len(registered) == 0 {
		t.Error("no routes registered")
	}
}

// TestOpenAPIServedDocument checks that GET /openapi.json serves exactly
// the embedded document, without a token, as a valid OpenAPI 3.1 document.
func TestOpenAPIServedDocument(t *testing.T) {
	_, base := startOASNode(t, api.Config{Auth: oasAuth()})
	resp, err := http.Get(base + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	doc := api.OpenAPI()
	if !bytes.Equal(raw, doc) {
		t.Fatalf("GET /openapi.json serves %d bytes that differ from the embedded %d", len(raw), len(doc))
	}
	if !json.Valid(raw) {
		t.Fatal("the served document is not JSON")
	}
	loader := openapi3.NewLoader()
	served, err := loader.LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := served.Validate(loader.Context); err != nil {
		t.Fatal(err)
	}
	if served.OpenAPI != "3.1.0" || served.Info.Version != "1" {
		t.Errorf("openapi %q, info.version %q", served.OpenAPI, served.Info.Version)
	}
	// OpenAPI returns a copy: changing it changes nothing served.
	doc[0] = 'X'
	if api.OpenAPI()[0] != '{' {
		t.Error("OpenAPI() returns the embedded bytes themselves")
	}
}

// TestOpenAPIErrorCodes checks the document's error codes against the
// server's table: the ErrorCode enum holds exactly its codes; each code is
// admitted by some documented answer of its status (METHOD_NOT_ALLOWED:
// by the MethodNotAllowed component, as no operation lists 405); and no
// documented error answer admits a code of another status.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	d := loadOpenAPI(t)
	statusOf := api.StatusOfCodes()
	var enum []string
	for _, v := range d.schema(t, "ErrorCode").Enum {
		enum = append(enum, v.(string))
	}
	var codes []string
	for code := range statusOf {
		codes = append(codes, code)
	}
	slices.Sort(enum)
	slices.Sort(codes)
	if !slices.Equal(enum, codes) {
		t.Fatalf("ErrorCode enum %v, server codes %v", enum, codes)
	}
	envelope := func(code string) any {
		return map[string]any{"error": map[string]any{
			"code": code, "message": "m", "execution_id": "exec_" + strings.Repeat("0", 36),
			"status": "running", "principal": "p", "field": "f",
		}}
	}
	// The JSON schemas of the documented error answers, by status.
	bodies := map[int][]*openapi3.Schema{}
	for path, item := range d.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for key, ref := range op.Responses.Map() {
				status, err := strconv.Atoi(key)
				if err != nil || status < 400 {
					continue
				}
				mt := ref.Value.Content.Get("application/json")
				if mt == nil || mt.Schema == nil {
					t.Errorf("%s %s: answer %d has no JSON error body", method, path, status)
					continue
				}
				if !slices.Contains(bodies[status], mt.Schema.Value) { // shared components: check each once
					bodies[status] = append(bodies[status], mt.Schema.Value)
				}
			}
		}
	}
	// The answers of every path, outside the operations.
	for status, name := range map[int]string{http.StatusMethodNotAllowed: "MethodNotAllowed", http.StatusRequestHeaderFieldsTooLarge: "HeaderFieldsTooLarge", http.StatusMisdirectedRequest: "MisdirectedRequest"} {
		resp := d.doc.Components.Responses[name]
		if resp == nil {
			t.Fatalf("no %s response component", name)
		}
		bodies[status] = append(bodies[status], resp.Value.Content.Get("application/json").Schema.Value)
	}
	// The statuses beyond a code's: documented, each admitting its code
	// and no other.
	beyond := api.StatusBeyondCodes()
	for status, code := range beyond {
		if len(bodies[status]) == 0 {
			t.Errorf("status %d (%s) is not documented", status, code)
		}
		for _, s := range bodies[status] {
			for _, other := range codes {
				if admitted := visit(s, envelope(other)) == nil; admitted != (other == code) {
					t.Errorf("a documented %d answer admits %s: %v, want only %s", status, other, admitted, code)
				}
			}
		}
	}
	for _, code := range codes {
		admitted := false
		for _, s := range bodies[statusOf[code]] {
			admitted = admitted || visit(s, envelope(code)) == nil
		}
		if !admitted {
			t.Errorf("%s: no documented %d answer admits it", code, statusOf[code])
		}
		for status, schemas := range bodies {
			if status == statusOf[code] || beyond[status] == code {
				continue
			}
			for _, s := range schemas {
				if visit(s, envelope(code)) == nil {
					t.Errorf("%s: a documented %d answer admits it; its status is %d", code, status, statusOf[code])
				}
			}
		}
	}
}

// TestOpenAPIValidatorRejectsWrongAnswers proves that the validation the
// other tests rely on bites: answers and requests that break the document
// in one way each fail, next to a control that passes.
func TestOpenAPIValidatorRejectsWrongAnswers(t *testing.T) {
	d := loadOpenAPI(t)
	route := func(method, target, body string, header ...string) *openapi3filter.RequestValidationInput {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, "http://node"+target, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer x")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		r, params, err := d.router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		return &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: r, Options: requestOptions()}
	}
	answer := func(in *openapi3filter.RequestValidationInput, status int, body string, header ...string) error {
		h := http.Header{"Content-Type": {"application/json"}}
		for i := 0; i+1 < len(header); i += 2 {
			h.Set(header[i], header[i+1])
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: h, Options: responseOptions()}
		out.SetBodyBytes([]byte(body))
		return openapi3filter.ValidateResponse(context.Background(), out)
	}
	const (
		id       = `"exec_01KB8Y9Q7M0000000000000000000000ZZ"`
		callOK   = `{"execution_id":` + id + `,"request_id":"r","session_id":"","tool":"echo","status":"completed","data":{},"replayed":false,"started_at":"2026-11-30T10:00:00.123Z","finished_at":"2026-11-30T10:00:00.140Z"}`
		fp       = `"` + "abababababababababababababababababababababababababababababababab" + `"`
		recordOK = `{"execution_id":` + id + `,"session_id":"s","tool":"sleep","status":"running","resolved":false,"started_at":"2026-11-30T10:00:00.123Z","fingerprint":` + fp + `,"node_id":"node1","principal":"planner"}`
	)
	call := route(http.MethodPost, "/v1/tools/call", `{"tool":"echo"}`)
	exec := route(http.MethodGet, "/v1/executions/exec_1", "")

	for _, tc := range []struct {
		name   string
		in     *openapi3filter.RequestValidationInput
		status int
		body   string
		header []string
		ok     bool
	}{
		{"control: a call answer", call, 200, callOK, nil, true},
		{"control: a record", exec, 200, recordOK, nil, true},
		{"control: an uncertain call", call, 409, `{"error":{"code":"EXECUTION_UNCERTAIN","message":"m","execution_id":` + id + `,"status":"running"}}`, []string{"Retry-After", "1"}, true},
		{"control: unavailable", call, 503, `{"error":{"code":"UNAVAILABLE","message":"m"}}`, []string{"Retry-After", "1"}, true},
		{"an unknown error code", call, 404, `{"error":{"code":"NO_SUCH_CODE","message":"m"}}`, nil, false},
		{"a code of another status", call, 404, `{"error":{"code":"NOT_FOUND","message":"m"}}`, nil, false},
		{"an error without message", call, 404, `{"error":{"code":"UNKNOWN_TOOL"}}`, nil, false},
		{"an error member outside the envelope", call, 404, `{"error":{"code":"UNKNOWN_TOOL","message":"m","hint":"x"}}`, nil, false},
		{"a bare error", call, 404, `{"code":"UNKNOWN_TOOL","message":"m"}`, nil, false},
		{"EXECUTION_UNCERTAIN without execution_id", call, 409, `{"error":{"code":"EXECUTION_UNCERTAIN","message":"m","status":"running"}}`, nil, false},
		{"EXECUTION_UNCERTAIN of a finished execution", call, 409, `{"error":{"code":"EXECUTION_UNCERTAIN","message":"m","execution_id":` + id + `,"status":"completed"}}`, nil, false},
		{"control: a principal over its rate", call, 429, `{"error":{"code":"RATE_LIMITED","message":"m","principal":"p"}}`, []string{"Retry-After", "1"}, true},
		{"control: an address over its failures", call, 429, `{"error":{"code":"RATE_LIMITED","message":"m","source":"127.0.0.1"}}`, []string{"Retry-After", "6"}, true},
		{"RATE_LIMITED naming neither principal nor source", call, 429, `{"error":{"code":"RATE_LIMITED","message":"m"}}`, []string{"Retry-After", "1"}, false},
		{"RATE_LIMITED without Retry-After", call, 429, `{"error":{"code":"RATE_LIMITED","message":"m","source":"127.0.0.1"}}`, nil, false},
		{"503 without Retry-After", call, 503, `{"error":{"code":"UNAVAILABLE","message":"m"}}`, nil, false},
		{"401 without WWW-Authenticate", call, 401, `{"error":{"code":"UNAUTHORIZED","message":"m"}}`, nil, false},
		{"an undocumented status", call, 418, `{"error":{"code":"INTERNAL","message":"m"}}`, nil, false},
		{"a call answer without replayed", call, 200, strings.Replace(callOK, `"replayed":false,`, "", 1), nil, false},
		{"a call answer with an unknown member", call, 200, strings.Replace(callOK, `"replayed":false`, `"replayed":false,"cost":1`, 1), nil, false},
		{"a completed answer without data", call, 200, strings.Replace(callOK, `"data":{},`, "", 1), nil, false},
		{"a completed answer with an error", call, 200, strings.Replace(callOK, `"data":{}`, `"data":{},"error":{"code":"X"}`, 1), nil, false},
		{"a call answer that is still running", call, 200, strings.Replace(callOK, `"completed"`, `"running"`, 1), nil, false},
		{"a timestamp without milliseconds", call, 200, strings.Replace(callOK, "10:00:00.123Z", "10:00:00Z", 1), nil, false},
		{"a record with an unknown status", exec, 200, strings.Replace(recordOK, `"running"`, `"paused"`, 1), nil, false},
		{"a record without fingerprint", exec, 200, strings.Replace(recordOK, `"fingerprint":`+fp+`,`, "", 1), nil, false},
		{"a running record with finished_at", exec, 200, strings.Replace(recordOK, `"resolved":false`, `"resolved":false,"finished_at":"2026-11-30T10:00:00.140Z"`, 1), nil, false},
		{"a record that is an execution id", exec, 200, `{"execution_id":"order-1"}`, nil, false},
		{"a text answer", exec, 200, `ok`, []string{"Content-Type", "text/plain"}, false},
	} {
		err := answer(tc.in, tc.status, tc.body, tc.header...)
		if tc.ok && err != nil {
			t.Errorf("%s: rejected: %v", tc.name, err)
		}
		if !tc.ok && err == nil {
			t.Errorf("%s: accepted: %d %s", tc.name, tc.status, tc.body)
		}
	}

	// Requests.
	for _, tc := range []struct {
		name string
		in   *openapi3filter.RequestValidationInput
		ok   bool
	}{
		{"control: a call", route(http.MethodPost, "/v1/tools/call", `{"tool":"echo","request_id":"a","timeout_ms":1e3}`), true},
		{"a typo of request_id", route(http.MethodPost, "/v1/tools/call", `{"tool":"echo","requestId":"a"}`), false},
		{"a request_id over 255 bytes", route(http.MethodPost, "/v1/tools/call", `{"tool":"echo","request_id":"`+strings.Repeat("a", 256)+`"}`), false},
		{"a bad Idempotency-Key", route(http.MethodPost, "/v1/tools/call", `{"tool":"echo"}`, "Idempotency-Key", "a b"), false},
		{"a resolve without status", route(http.MethodPost, "/v1/executions/exec_1/resolve", `{"data":1}`), false},
	} {
		err := openapi3filter.ValidateRequest(context.Background(), tc.in)
		if tc.ok && err != nil {
			t.Errorf("%s: rejected: %v", tc.name, err)
		}
		if !tc.ok && err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}
