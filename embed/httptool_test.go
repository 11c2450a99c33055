package embed_test

// HTTP tools (issue 14, findings 2 and 3): a node whose config file
// declares HTTP tools with secrets in their URLs and headers, driven over
// real HTTP on loopback.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/tests/testutil"
)

// The secrets of the config below: one in a URL's query, one in a header
// (from the environment).
const (
	httpQuerySecret  = "query-SECRET-7f3a"
	httpHeaderSecret = "header-SECRET-91c2"
)

// otherLoopbackListener listens on a loopback host other than 127.0.0.1.
func otherLoopbackListener(t *testing.T) net.Listener {
	t.Helper()
	for _, addr := range []string{"127.0.0.2:0", "[::1]:0"} {
		if ln, err := net.Listen("tcp", addr); err == nil {
			return ln
		}
	}
	t.Skip("no loopback host besides 127.0.0.1 to listen on")
	return nil
}

// toolAnswer is the part of a call's answer these tests read.
type toolAnswer = testutil.ToolAnswer

// TestHTTPToolsKeepSecretsAndStayOnTheirHost: an HTTP tool's secrets (in
// its URL's query, in a header from the environment) are in no answer,
// replay, record or log line; a request never sent is answered 503 and
// recorded nowhere; a redirect to another host is not followed; the
// egress policy refuses an upstream outside allow_networks.
func TestHTTPToolsKeepSecretsAndStayOnTheirHost(t *testing.T) {
	t.Parallel() // a node of its own on ports the kernel picks
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	// The foreign host a redirect points at, and the upstream that
	// redirects there (307: the body would be posted again).
	foreign := testutil.StartUpstream(t, otherLoopbackListener(t), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"foreign":true}`)
	})
	redirecting := testutil.StartUpstream(t, nil, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", foreign.URL+"/collect")
		w.WriteHeader(http.StatusTemporaryRedirect)
	})
	fenced := testutil.StartUpstream(t, nil, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	})

	config := fmt.Sprintf(`tools:
  - name: create_order
    http:
      url: http://%[1]s/orders?token=%[4]s
      headers: {X-Api-Key: "${CARMY_BB_KEY}"}
  - name: redirected
    http:
      url: %[2]s/orders?token=%[4]s
      headers: {X-Api-Key: "${CARMY_BB_KEY}"}
  - name: redirected_opt_in
    http:
      url: %[2]s/orders?token=%[4]s
      headers: {X-Api-Key: "${CARMY_BB_KEY}"}
      follow_redirects: true
  - name: fenced
    http:
      url: %[3]s/orders?token=%[4]s
      allow_networks: [10.0.0.0/8]
`, closed, redirecting.URL, fenced.URL, httpQuerySecret)
	var log logBuffer
	base, _ := startFromYAML(t, config, withEnv(map[string]string{"CARMY_BB_KEY": httpHeaderSecret}), withLog(&log))

	noSecret := func(t *testing.T, what, text string, extra ...string) {
		t.Helper()
		var leaks []string
		for _, s := range append([]string{httpQuerySecret, httpHeaderSecret, "SECRET"}, extra...) {
			if strings.Contains(text, s) {
				leaks = append(leaks, s)
			}
		}
		if leaks != nil {
			t.Errorf("%s holds %q:\n%s", what, leaks, text)
		}
	}
	// call makes a call with a request_id, then its retry, and checks that
	// the retry is a replay of the same answer and that neither, nor the
	// record, holds a secret or one of extra; it returns the answer.
	call := func(t *testing.T, tool string, extra ...string) toolAnswer {
		t.Helper()
		body := fmt.Sprintf(`{"tool":%q,"arguments":{"sku":"KB-01"},"request_id":"bb-%s"}`, tool, tool)
		status, raw := httpDo(t, http.MethodPost, base+"/v1/tools/call", "", body)
		var a toolAnswer
		if err := json.Unmarshal([]byte(raw), &a); status != http.StatusOK || err != nil {
			t.Fatalf("call %s: %d %s", tool, status, raw)
		}
		status, again := httpDo(t, http.MethodPost, base+"/v1/tools/call", "", body)
		if want := strings.Replace(raw, `"replayed":false`, `"replayed":true`, 1); status != http.StatusOK || again != want {
			t.Fatalf("retry of %s: %d %s, want the replay %s", tool, status, again, want)
		}
		status, rec := httpDo(t, http.MethodGet, base+"/v1/executions/"+a.ExecutionID, "", "")
		if status != http.StatusOK {
			t.Fatalf("GET the execution of %s: %d %s", tool, status, rec)
		}
		for what, text := range map[string]string{"the answer": raw, "the replay": again, "the record": rec} {
			noSecret(t, what+" of "+tool, text, extra...)
		}
		return a
	}

	// docs/guarantees.md, "Nothing sent, nothing recorded": a refused connection is
	// answered 503 with Retry-After, saying the tool did not run, and
	// leaves no record; once the upstream listens, the retry with the same
	// request_id runs the tool.
	t.Run("unreachable", func(t *testing.T) {
		body := `{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"bb-create_order"}`
		resp, err := http.Post(base+"/v1/tools/call", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var env struct {
			Error struct{ Code, Message string }
		}
		json.Unmarshal(raw, &env)
		want := "tool create_order did not run: its request was never sent (the upstream could not be reached: connection refused)"
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
			env.Error.Code != "UNAVAILABLE" || !strings.HasPrefix(env.Error.Message, want) {
			t.Fatalf("answer = %d (Retry-After %q) %s; want 503 UNAVAILABLE with Retry-After, saying %q",
				resp.StatusCode, resp.Header.Get("Retry-After"), raw, want)
		}
		noSecret(t, "the answer", string(raw), closed, "/orders", "token")
		if status, rec := httpDo(t, http.MethodGet, base+"/v1/executions?request_id=bb-create_order", "", ""); status != http.StatusNotFound {
			t.Fatalf("the identity after a request never sent: %d %s; want 404 (nothing recorded)", status, rec)
		}
		ln, err := net.Listen("tcp", closed)
		if err != nil {
			t.Fatalf("listening again on %s: %v", closed, err)
		}
		up := testutil.StartUpstream(t, ln, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"order_id":1}`)
		})
		a := call(t, "create_order", "/orders", "token")
		if a.Status != "completed" || up.Requests.Load() != 1 {
			t.Errorf("the retry once the upstream listens = %+v, upstream requests %d; want completed, run once", a, up.Requests.Load())
		}
	})

	t.Run("redirect to another host", func(t *testing.T) {
		for _, tool := range []string{"redirected", "redirected_opt_in"} {
			a := call(t, tool, redirecting.URL)
			if a.Status != "failed" || a.Error.Code != "UPSTREAM_STATUS" || a.Error.Status != http.StatusTemporaryRedirect ||
				!strings.Contains(a.Error.Message, "not followed") {
				t.Errorf("%s: answer = %+v, want failed UPSTREAM_STATUS 307, not followed", tool, a)
			}
		}
		if got := redirecting.Requests.Load(); got != 2 {
			t.Errorf("the redirecting upstream got %d requests, want 2 (one per tool)", got)
		}
		if got := foreign.Requests.Load(); got != 0 {
			t.Errorf("the foreign host got %d requests, want none", got)
		}
	})

	t.Run("egress policy", func(t *testing.T) {
		a := call(t, "fenced", fenced.URL, "127.0.0.1")
		if a.Status != "failed" || a.Error.Code != "EGRESS_DENIED" || !strings.HasPrefix(a.Error.Message, "tool fenced: ") {
			t.Errorf("answer = %+v, want failed EGRESS_DENIED naming the tool", a)
		}
		if got := fenced.Requests.Load(); got != 0 {
			t.Errorf("the fenced upstream got %d requests, want none", got)
		}
	})

	// The node logged each failure's detail at WARN, without the secrets.
	logs := log.String()
	for _, want := range []string{"http tool: the upstream could not be reached", "http tool: a redirect was not followed", "http tool: the egress policy refused"} {
		if !slices.ContainsFunc(strings.Split(logs, "\n"), func(line string) bool {
			return strings.Contains(line, "WARN") && strings.Contains(line, want)
		}) {
			t.Errorf("the node's log has no WARN line with %q:\n%s", want, logs)
		}
	}
	noSecret(t, "the node's log", logs)
}
