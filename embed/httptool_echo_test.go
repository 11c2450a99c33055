package embed_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Issue 39: an upstream that echoes its request's headers, as httpbin
// does, had an HTTP tool's configured Authorization and X-Api-Key (from
// the environment, by ${VAR}) recorded and served by GET
// /v1/executions/{id}: in a 2xx answer, and in an error body that escaped
// '/' as PHP does. Neither holds them now, as written or decoded.
func TestHTTPToolEchoedHeadersAreRedacted(t *testing.T) {
	t.Parallel() // a node of its own on ports the kernel picks
	const (
		token = "tok/en-SECRET-5e1d"
		key   = "key/2222-SECRET-0b7c"
	)
	echo := func(status int, php bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			h := map[string]string{}
			for k := range r.Header {
				h[k] = r.Header.Get(k)
			}
			b, _ := json.Marshal(map[string]any{"headers": h})
			if php {
				b = []byte(strings.ReplaceAll(string(b), "/", `\/`))
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			w.Write(b)
		}
	}
	ok := httptest.NewServer(echo(http.StatusOK, false))
	t.Cleanup(ok.Close)
	refused := httptest.NewServer(echo(http.StatusUnauthorized, true))
	t.Cleanup(refused.Close)
	config := fmt.Sprintf(`tools:
  - name: echo_ok
    http:
      url: %s/anything
      headers: {Authorization: "Bearer ${CARMY_ECHO_TOKEN}", X-Api-Key: "${CARMY_ECHO_KEY}"}
  - name: echo_refused
    http:
      url: %s/status/401
      headers: {Authorization: "Bearer ${CARMY_ECHO_TOKEN}", X-Api-Key: "${CARMY_ECHO_KEY}"}
`, ok.URL, refused.URL)
	base, _ := startFromYAML(t, config, withEnv(map[string]string{"CARMY_ECHO_TOKEN": token, "CARMY_ECHO_KEY": key}))

	for tool, want := range map[string]string{"echo_ok": "completed", "echo_refused": "failed"} {
		status, raw := httpDo(t, http.MethodPost, base+"/v1/tools/call", "", fmt.Sprintf(`{"tool":%q,"arguments":{},"request_id":"r-%s"}`, tool, tool))
		var a struct {
			ExecutionID string `json:"execution_id"`
			Status      string `json:"status"`
		}
		if err := json.Unmarshal([]byte(raw), &a); status != http.StatusOK || err != nil || a.Status != want {
			t.Fatalf("call %s: %d %s, want %s", tool, status, raw, want)
		}
		status, rec := httpDo(t, http.MethodGet, base+"/v1/executions/"+a.ExecutionID, "", "")
		if status != http.StatusOK || !strings.Contains(rec, "[redacted]") {
			t.Fatalf("GET the execution of %s: %d %s; want the echo, redacted", tool, status, rec)
		}
		// Decoded: every string as the upstream meant it.
		var v any
		if err := json.Unmarshal([]byte(rec), &v); err != nil {
			t.Fatal(err)
		}
		decoded := fmt.Sprint(v)
		for _, text := range []string{raw, rec, decoded} {
			// The digits with the dash that follows them in the key: a
			// random port or id may hold "2222" alone.
			if strings.Contains(text, "SECRET") || strings.Contains(text, "2222-") {
				t.Errorf("%s: the answer or the record holds a configured secret:\n%s", tool, text)
			}
		}
	}
}
