package engine

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

// echoHeaders are configured headers holding secrets with a '/', which
// PHP's JSON encoder writes `\/`.
func echoHeaders() map[string]string {
	return map[string]string{"X-Api-Key": "key/2222-SECRET-api", "Authorization": "Bearer tok/3333-SECRET-bearer"}
}

// headerEcho is what an upstream such as httpbin answers: the request's
// headers, as JSON encoded by enc.
func headerEcho(r *http.Request, enc func([]byte) []byte) string {
	h := map[string]string{}
	for k := range r.Header {
		h[k] = r.Header.Get(k)
	}
	b, _ := json.Marshal(map[string]any{"headers": h, "url": "http://" + r.Host + r.URL.Path})
	return string(enc(b))
}

// Encoders of JSON text as some upstreams write it.
var (
	plainJSON = func(b []byte) []byte { return b }
	// phpJSON: PHP's default, '/' escaped (json.Marshal writes no '/'
	// outside strings).
	phpJSON = func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("/"), []byte(`\/`)) }
	// unicodeJSON: every 'e' and 'S' of a string written as a \u escape.
	unicodeJSON = func(b []byte) []byte {
		return []byte(strings.NewReplacer("e", `\u0065`, "S", `\u0053`).Replace(string(b)))
	}
)

// assertNoEcho fails the test when raw, as written or decoded, holds a
// secret of echoHeaders.
func assertNoEcho(t *testing.T, what string, raw []byte) {
	t.Helper()
	decoded := string(raw)
	var v any
	if json.Unmarshal(raw, &v) == nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(v)
		decoded = buf.String()
	}
	for _, text := range []string{string(raw), decoded} {
		// The digits with the dash that follows them in the secrets: a
		// random port or id may hold "3333" alone (a port 43333 did).
		if strings.Contains(text, "SECRET") || strings.Contains(text, "2222-") || strings.Contains(text, "3333-") {
			t.Errorf("%s holds a configured secret:\n%s", what, raw)
			return
		}
	}
}

// Issue 39: an upstream that echoes its request's headers (as httpbin
// does) in a 2xx answer had the tool's Authorization and X-Api-Key
// recorded and replayed; redaction looked at failed answers only, and at
// their raw bytes. Now every answer is redacted in the decoded text of
// its strings, however the upstream escaped them, and a text answer in
// its text.
func TestHTTPToolRedactsEchoedHeadersInAnswers(t *testing.T) {
	tests := []struct {
		name string
		ct   string
		enc  func([]byte) []byte
	}{
		{"json", "application/json", plainJSON},
		{"json with PHP's escaped slashes", "application/json", phpJSON},
		{"json with unicode escapes", "application/json", unicodeJSON},
		{"text", "text/plain", phpJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				answer(http.StatusOK, tt.ct, headerEcho(r, tt.enc))(w, r)
			})
			app := quietApp(t)
			mustAddHTTPTool(t, app, "echo", HTTPTool{URL: up.URL + "/anything", Headers: echoHeaders()}, 10*time.Second)
			req := Request{Tool: "echo", RequestID: "r1"}
			resp, err := app.Call(t.Context(), Caller{Principal: "p"}, req)
			if err != nil || resp.Record.Status != store.StatusCompleted {
				t.Fatalf("Call = %+v, %v; want completed", resp, err)
			}
			rec, err := app.Store().Lookup(t.Context(), store.Key{Principal: "p", RequestID: "r1"})
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			assertNoEcho(t, "the recorded data", rec.Data)
			if !strings.Contains(string(rec.Data), `Authorization\":\"[redacted]`) && !strings.Contains(string(rec.Data), `"Authorization":"[redacted]"`) {
				t.Errorf("the recorded data = %s; want the echo with its secrets [redacted]", rec.Data)
			}
			again, err := app.Call(t.Context(), Caller{Principal: "p"}, req)
			if err != nil || !again.Replayed {
				t.Fatalf("the retry = %+v, %v; want the replay", again, err)
			}
			assertNoEcho(t, "the replayed data", again.Record.Data)
		})
	}
}

// Issue 39: an error body was redacted as raw bytes, so a secret an
// upstream echoed JSON-escaped (`key\/2222`, PHP's default) was recorded
// as it was. A JSON error body is now redacted in its decoded strings.
func TestHTTPToolRedactsEscapedEchoInErrorBody(t *testing.T) {
	for name, enc := range map[string]func([]byte) []byte{"php": phpJSON, "unicode": unicodeJSON} {
		t.Run(name, func(t *testing.T) {
			up := newFakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				answer(http.StatusUnauthorized, "application/json", headerEcho(r, enc))(w, r)
			})
			app := quietApp(t)
			mustAddHTTPTool(t, app, "echo", HTTPTool{URL: up.URL + "/status/401", Headers: echoHeaders()}, 10*time.Second)
			resp, err := app.Call(t.Context(), Caller{Principal: "p"}, Request{Tool: "echo", RequestID: "r1"})
			if err != nil || resp.Record.Status != store.StatusFailed {
				t.Fatalf("Call = %+v, %v; want failed", resp, err)
			}
			e := recordedError(t, resp.Record)
			body, _ := e["body"].(string)
			if e["code"] != CodeUpstreamStatus || !strings.Contains(body, "[redacted]") {
				t.Errorf("error = %s; want UPSTREAM_STATUS with the echo, redacted", resp.Record.Error)
			}
			assertNoEcho(t, "the recorded error", resp.Record.Error)
			assertNoEcho(t, "the recorded error's body", []byte(body))
		})
	}
}

// Issue 39: the data a reconcile probe found was recorded unredacted; a
// probe endpoint that echoes the headers it was sent (the tool's own)
// put them in the resolved record.
func TestHTTPProbeRedactsEchoedHeaders(t *testing.T) {
	t.Parallel()
	up := &probedUpstream{headers: echoHeaders(), probeEcho: func(r *http.Request) string { return headerEcho(r, phpJSON) }}
	up.probeStatus.Store(http.StatusOK)
	app, _ := probedApp(t, up, time.Hour)
	req := Request{Tool: "create_order", RequestID: "order-echo"}
	loseAnswer(t, app, up, req)
	key := store.Key{Principal: "p", RequestID: "order-echo"}
	rec := waitRecord(t, app, key, "resolved by the probe", func(r store.Record, err error) bool { return err == nil && r.Status.Finished() })
	if rec.Status != store.StatusCompleted || rec.ResolvedBy != store.ResolvedByProbe || !strings.Contains(string(rec.Data), "[redacted]") {
		t.Fatalf("after the probe: %+v; want completed by the probe, with the echo redacted", rec)
	}
	assertNoEcho(t, "the probe's recorded data", rec.Data)
}
