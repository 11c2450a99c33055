package main_test

// Black-box tests of issue 28's client-facing findings against a built
// `carmy serve`: the Host allow-list against DNS rebinding and the
// refusal of cross-origin writes (3), JSON-RPC batches and the rate limit
// of every method at /mcp (4), duplicate keys at /mcp (6), wrong cluster
// keys limited and weak ones refused (7), trusted proxies for the lockout
// and a metadata document that names the node, not the Host (9).

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/tests/testutil"
)

// hbReq sends method path to base with body and headers (Host among them
// sets the Host header) and returns the status, header and body.
func hbReq(t *testing.T, base, method, path, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(raw)
}

// errorCode returns the code of an error envelope (docs/errors.md) ("" for none).
func errorCode(body string) string {
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &env)
	return env.Error.Code
}

// TestBlackBoxHostAllowList checks, on a node without auth (--dev), that a
// request naming a foreign Host is refused 421 in the envelope on every
// route: the rebinding page of issue 28 added a ghost voter with
// POST /v1/cluster/nodes and Host: attacker.example. IP addresses,
// localhost and --allowed-hosts are served; a cross-origin POST without
// Content-Type (no preflight) is refused 403 and runs nothing.
func TestBlackBoxHostAllowList(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{}, "--dev", "--allowed-hosts", "carmy.test")
	n.WaitReady(t, 30*time.Second)
	_, port, _ := strings.Cut(n.Addr, ":")
	jsonHdr := map[string]string{"Content-Type": "application/json"}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	mcpHdr := with(jsonHdr, "Accept", "application/json, text/event-stream", "Mcp-Protocol-Version", "2025-11-25")
	for _, rt := range []struct {
		method, path, body string
		hdr                map[string]string
	}{
		{"POST", "/v1/cluster/nodes", `{"id":"ghost","raft_addr":"127.0.0.1:1","http_addr":"127.0.0.1:2"}`, jsonHdr},
		{"POST", "/v1/tools/call", `{"tool":"echo","request_id":"rebound"}`, jsonHdr},
		{"GET", "/v1/executions", "", nil},
		{"GET", "/v1/cluster", "", nil},
		{"GET", "/ui/", "", nil},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, mcpHdr},
		{"GET", "/metrics", "", nil},
		{"GET", "/healthz", "", nil},
	} {
		for _, host := range []string{"attacker.example", "attacker.example:" + port} {
			status, _, body := hbReq(t, n.URL, rt.method, rt.path, rt.body, with(rt.hdr, "Host", host))
			if status != http.StatusMisdirectedRequest || errorCode(body) != "FORBIDDEN" || !strings.Contains(body, `"host":"attacker.example"`) {
				t.Errorf("%s %s with Host %s: %d %s, want 421 FORBIDDEN", rt.method, rt.path, host, status, body)
			}
		}
	}
	var view struct {
		Nodes []struct {
			ID string `json:"id"`
		} `json:"nodes"`
	}
	_, _, raw := hbReq(t, n.URL, "GET", "/v1/cluster", "", nil)
	if err := jsonUnmarshal(raw, &view); err != nil || len(view.Nodes) != 1 {
		t.Errorf("the cluster after the rebound requests: %s (want one node, no ghost)", raw)
	}
	if status, _, body := hbReq(t, n.URL, "GET", "/v1/executions?request_id=rebound", "", nil); status != http.StatusNotFound {
		t.Errorf("the rebound call was recorded: %d %s", status, body)
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "carmy.test:" + port, "10.0.0.1"} {
		if status, _, body := hbReq(t, n.URL, "GET", "/v1/tools", "", map[string]string{"Host": host}); status != http.StatusOK {
			t.Errorf("GET /v1/tools with Host %s: %d %s, want 200", host, status, body)
		}
	}
	// A page of another origin posts a body without Content-Type (read
	// as JSON, and no preflight) to the node's IP address.
	status, _, body := hbReq(t, n.URL, "POST", "/v1/tools/call", `{"tool":"echo","request_id":"cross-origin"}`,
		map[string]string{"Origin": "http://attacker.example", "Sec-Fetch-Site": "cross-site"})
	if status != http.StatusForbidden || errorCode(body) != "FORBIDDEN" {
		t.Errorf("a cross-origin POST: %d %s, want 403 FORBIDDEN", status, body)
	}
	if status, _, body := hbReq(t, n.URL, "GET", "/v1/executions?request_id=cross-origin", "", nil); status != http.StatusNotFound {
		t.Errorf("the cross-origin call was recorded: %d %s", status, body)
	}
	if status, _, body := hbReq(t, n.URL, "POST", "/v1/tools/call", `{"tool":"echo"}`, map[string]string{"Origin": n.URL}); status != http.StatusOK {
		t.Errorf("a same-origin POST: %d %s, want 200", status, body)
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// Tokens of the hardened MCP node.
const (
	hbPlanner = "hardening-planner-secret-01"
	hbBatcher = "hardening-batcher-secret-01"
	hbAdmin   = "hardening-admin-secret-0001"
)

// startHardenedNode starts a node with auth, a rate of 5 requests in a
// burst per principal, 2 failed authentications a minute per client and
// 127.0.0.0/8 as trusted proxies.
func startHardenedNode(t *testing.T, bin string, extra ...string) *testutil.Node {
	t.Helper()
	config := `demo_tools: true
auth:
  admin_token_env: HB_ADMIN
  tokens:
    - {principal: planner, token_env: HB_PLANNER, tools: ["*"]}
    - {principal: batcher, token_env: HB_BATCHER, tools: ["*"]}
limits:
  rate_per_principal: 0.01
  rate_burst: 5
  auth_failures_per_minute: 2
`
	path := filepath.Join(t.TempDir(), "carmy.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{Env: []string{"HB_ADMIN=" + hbAdmin, "HB_PLANNER=" + hbPlanner, "HB_BATCHER=" + hbBatcher}},
		append([]string{"--config", path, "--bootstrap"}, extra...)...)
	n.WaitReady(t, 30*time.Second)
	return n
}

// mcpHeaders are those of a well-formed /mcp request as token, at version
// (none when "").
func mcpHeaders(token, version string) map[string]string {
	h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": "Bearer " + token}
	if version != "" {
		h["Mcp-Protocol-Version"] = version
	}
	return h
}

// TestBlackBoxMCPDuplicateKeysAndBatches checks /mcp against the findings
// of issue 28: a repeated member at any depth is -32600 and runs nothing
// ({"name":"echo","name":"fail"} ran fail); a batch is refused at the
// versions that removed them and capped at 100 entries where they exist;
// each entry, and every method, counts against the principal's rate.
func TestBlackBoxMCPDuplicateKeysAndBatches(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	n := startHardenedNode(t, testutil.BuildCarmy(t))
	for name, params := range map[string]string{
		"name":      `{"name":"echo","name":"fail","_meta":{"carmy/request_id":"dup-name"}}`,
		"arguments": `{"name":"fail","arguments":{"x":1,"x":2},"_meta":{"carmy/request_id":"dup-arguments"}}`,
		"_meta":     `{"name":"fail","_meta":{"carmy/request_id":"dup-meta","carmy/session_id":"a","carmy/session_id":"b"}}`,
		"params":    `{"name":"echo","_meta":{"carmy/request_id":"dup-params"}},"params":{"name":"fail","_meta":{"carmy/request_id":"dup-params"}}`,
	} {
		for _, version := range mcpVersions {
			body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + params + `}`
			status, _, raw := hbReq(t, n.URL, "POST", "/mcp", body, mcpHeaders(hbPlanner, version))
			if status != http.StatusBadRequest || !strings.Contains(raw, `"code":-32600`) || !strings.Contains(raw, `"INVALID_REQUEST"`) {
				t.Errorf("a repeated member in %s at %s: %d %s, want 400 with -32600", name, version, status, raw)
			}
		}
		id := "dup-" + name
		if status, _, raw := hbReq(t, n.URL, "GET", "/v1/executions?request_id="+id, "", map[string]string{"Authorization": "Bearer " + hbPlanner}); status != http.StatusNotFound {
			t.Errorf("a call with a repeated member in %s ran: %d %s", name, status, raw)
		}
	}
	top := `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"fail"}}`
	if status, _, raw := hbReq(t, n.URL, "POST", "/mcp", top, mcpHeaders(hbPlanner, "2025-11-25")); status != http.StatusBadRequest || !strings.Contains(raw, `"code":-32600`) {
		t.Errorf("a repeated method: %d %s", status, raw)
	}

	list := func(i int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i) }
	batch := func(k int) string {
		parts := make([]string, k)
		for i := range parts {
			parts[i] = list(i + 1)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	for _, version := range mcpVersions {
		if status, _, raw := hbReq(t, n.URL, "POST", "/mcp", batch(2), mcpHeaders(hbAdmin, version)); status != http.StatusBadRequest || !strings.Contains(raw, `"code":-32600`) {
			t.Errorf("a batch at %s: %d %.200s, want 400 -32600", version, status, raw)
		}
	}
	if status, _, raw := hbReq(t, n.URL, "POST", "/mcp", batch(101), mcpHeaders(hbAdmin, "")); status != http.StatusBadRequest || !strings.Contains(raw, "1 to 100") {
		t.Errorf("a batch of 101 without a version: %d %.300s, want 400", status, raw)
	}
	if status, _, raw := hbReq(t, n.URL, "POST", "/mcp", batch(100), mcpHeaders(hbAdmin, "2025-03-26")); status != http.StatusOK || strings.Count(raw, `"tools":[`) != 100 {
		t.Errorf("a batch of 100 at 2025-03-26: %d %.300s, want 100 answers", status, raw)
	}
	// batcher's burst is 5: a batch of 8 gets 5 answers and 3 refusals.
	status, hdr, raw := hbReq(t, n.URL, "POST", "/mcp", batch(8), mcpHeaders(hbBatcher, "2025-03-26"))
	if status != http.StatusOK || strings.Count(raw, `"tools":[`) != 5 || strings.Count(raw, `"code":-32029`) != 3 || hdr.Get("Retry-After") == "" {
		t.Errorf("a batch of 8 over a burst of 5: %d Retry-After %q %.600s", status, hdr.Get("Retry-After"), raw)
	}
	// planner spent nothing above (refusals run nothing, lookups count):
	// tools/list and ping count, not only tools/call.
	for i := range 10 {
		status, hdr, raw := hbReq(t, n.URL, "POST", "/mcp", list(i), mcpHeaders(hbPlanner, "2025-11-25"))
		if status == http.StatusTooManyRequests {
			if !strings.Contains(raw, `"RATE_LIMITED"`) || hdr.Get("Retry-After") == "" {
				t.Errorf("tools/list over the rate: %d %s", status, raw)
			}
			return
		}
	}
	t.Error("10 tools/list over a burst of 5 were never refused")
}

// TestBlackBoxMetadataAndTrustedProxies checks that the /mcp metadata and
// the 401's resource_metadata name the node (its listener, or
// --public-url), not the request's Host; and that behind a trusted proxy
// the lockout keys on the client X-Forwarded-For names, so that one
// client's wrong tokens do not lock the others out.
func TestBlackBoxMetadataAndTrustedProxies(t *testing.T) {
	t.Parallel() // its own processes on ports the kernel picks
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	bin := testutil.BuildCarmy(t)
	n := startHardenedNode(t, bin, "--trusted-proxies", "127.0.0.0/8")
	attacker := map[string]string{"Host": "attacker.example"}
	_, _, doc := hbReq(t, n.URL, "GET", "/.well-known/oauth-protected-resource", "", attacker)
	if !strings.Contains(doc, `"resource":"`+n.URL+`/mcp"`) || strings.Contains(doc, "attacker") {
		t.Errorf("metadata with Host attacker.example: %s, want resource %s/mcp", doc, n.URL)
	}
	hdr := mcpHeaders("", "2025-11-25")
	delete(hdr, "Authorization")
	hdr["Host"] = "attacker.example"
	status, h, _ := hbReq(t, n.URL, "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, hdr)
	if want := `resource_metadata="` + n.URL + `/.well-known/oauth-protected-resource"`; status != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), want) {
		t.Errorf("401 with Host attacker.example: %d WWW-Authenticate %q, want %s", status, h.Get("WWW-Authenticate"), want)
	}

	guess := func(xff, token string) (int, string) {
		status, _, body := hbReq(t, n.URL, "GET", "/v1/tools", "", map[string]string{"X-Forwarded-For": xff, "Authorization": "Bearer " + token})
		return status, body
	}
	for range 2 {
		if status, body := guess("203.0.113.7", "wrong-token-wrong-token"); status != http.StatusUnauthorized {
			t.Fatalf("a wrong token: %d %s", status, body)
		}
	}
	if status, body := guess("198.51.100.9, 203.0.113.7", "wrong-token-wrong-token"); status != http.StatusTooManyRequests || !strings.Contains(body, `"source":"203.0.113.7"`) {
		t.Errorf("the guessing client, after its failures: %d %s, want 429 for 203.0.113.7", status, body)
	}
	if status, body := guess("198.51.100.9, 203.0.113.7", hbAdmin); status != http.StatusOK {
		t.Errorf("the guessing client's right token: %d %s, want 200 (the limit is on failures)", status, body)
	}
	if status, body := guess("203.0.113.8", hbAdmin); status != http.StatusOK {
		t.Errorf("another client behind the same proxy: %d %s, want 200", status, body)
	}

	pub := startHardenedNode(t, bin, "--public-url", "https://carmy.example.com")
	if _, _, doc := hbReq(t, pub.URL, "GET", "/.well-known/oauth-protected-resource/mcp", "", attacker); !strings.Contains(doc, `"resource":"https://carmy.example.com/mcp"`) {
		t.Errorf("metadata with --public-url: %s", doc)
	}
}

// TestBlackBoxClusterKeyGuesses checks that wrong cluster keys are
// limited like wrong tokens (issue 28 sent 340, all 403, never 429), and
// that a node refuses to start with a key of 16 repeated letters.
func TestBlackBoxClusterKeyGuesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the carmy binary")
	}
	if testutil.TestTLS() {
		t.Skip("about nodes with a cluster key, not node TLS")
	}
	// Not parallel: it counts a rate limiter's answers, which a loaded machine (slower requests, more refills) skews.
	bin := testutil.BuildCarmy(t)
	weak, err := testutil.Launch(t, bin, testutil.StartOptions{}, "--dev", "--cluster-key", "aaaaaaaaaaaaaaaa")
	if err == nil || !strings.Contains(weak.Logs(), "bits of entropy") {
		t.Errorf("a node with 16 repeated letters as its key: %v\n%s", err, weak.Logs())
	}

	dataDir := filepath.Join(t.TempDir(), "n1")
	n := testutil.StartCarmy(t, bin, testutil.StartOptions{}, "--dev", "--data-dir", dataDir)
	n.WaitReady(t, 30*time.Second)
	refused, limited := 0, 0
	var retryAfter string
	for range 40 {
		status, h, body := hbReq(t, n.URL, "GET", "/internal/v1/state", "", map[string]string{"Carmy-Cluster-Key": "wrong-key-wrong-key-wrong-key"})
		switch status {
		case http.StatusForbidden:
			refused++
		case http.StatusTooManyRequests:
			limited++
			retryAfter = h.Get("Retry-After")
			if !strings.Contains(body, "RATE_LIMITED") {
				t.Errorf("429 without RATE_LIMITED: %s", body)
			}
		default:
			t.Fatalf("a wrong key: %d %s", status, body)
		}
	}
	// A burst of 10 (the default per minute), and one more per 6 s.
	if refused < 10 || refused > 12 || limited != 40-refused || retryAfter == "" {
		t.Errorf("40 wrong keys: %d refused (403), %d limited (429, Retry-After %q); want 10 (or a few more) and the rest", refused, limited, retryAfter)
	}
	// A right key from the same address is never locked out: the nodes of
	// a cluster share addresses (loopback, a NAT) with whatever guesses.
	key, err := os.ReadFile(filepath.Join(dataDir, "cluster-key"))
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := hbReq(t, n.URL, "GET", "/internal/v1/state", "", map[string]string{"Carmy-Cluster-Key": strings.TrimSpace(string(key))}); status != http.StatusOK {
		t.Errorf("the right key after the guesses: %d %s; want 200", status, body)
	}
	// The node's own API is not locked out by the guesses.
	if code, body := bbPost(t, n.URL+"/v1/tools/call", `{"tool":"echo"}`); code != http.StatusOK {
		t.Errorf("a call after the guesses: %d %s", code, body)
	}
	m := scrapeText(t, n.URL)
	if !strings.Contains(m, fmt.Sprintf(`carmy_cluster_key_failures_total{result="unauthorized"} %d`, refused)) ||
		!strings.Contains(m, fmt.Sprintf(`carmy_cluster_key_failures_total{result="rate_limited"} %d`, limited)) {
		t.Errorf("metrics after the guesses:\n%s", grepLines(m, "carmy_cluster_key_failures_total"))
	}
}

func scrapeText(t *testing.T, base string) string {
	t.Helper()
	_, _, body := hbReq(t, base, "GET", "/metrics", "", nil)
	return body
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
