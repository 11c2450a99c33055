package api_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

const callPath = "/v1/tools/call"

// refusingServer serves a runtime whose Call fails the test: for bodies the
// api must refuse before the runtime sees them.
func refusingServer(t *testing.T, cfg api.Config) *httptest.Server {
	t.Helper()
	return newTestServer(t, &fakeRuntime{tb: t}, cfg)
}

func TestCallRefusesBadBodies(t *testing.T) {
	srv := refusingServer(t, api.Config{})
	cases := []struct {
		name, body string
		// field is the envelope's "field", "" for none.
		field string
	}{
		{"empty body", ``, ""},
		{"white space only", " \n\t", ""},
		{"malformed", `{"tool":`, ""},
		{"malformed member", `{"tool" "echo"}`, ""},
		{"not JSON", `tool=echo`, ""},
		{"trailing object", `{"tool":"echo"}{}`, ""},
		{"trailing garbage", `{"tool":"echo"} x`, ""},
		{"trailing bracket", `{"tool":"echo"}]`, ""},
		{"array", `[{"tool":"echo"}]`, ""},
		{"string", `"echo"`, ""},
		{"number", `42`, ""},
		{"tool as number", `{"tool":1}`, "tool"},
		{"tool as object", `{"tool":{"name":"echo"}}`, "tool"},
		{"request_id as number", `{"tool":"echo","request_id":7}`, "request_id"},
		{"session_id as bool", `{"tool":"echo","session_id":true}`, "session_id"},
		{"unknown field requestId", `{"tool":"echo","requestId":"r1"}`, "requestId"},
		{"unknown field idempotency_key", `{"tool":"echo","idempotency_key":"r1"}`, "idempotency_key"},
		{"repeated tool", `{"tool":"echo","tool":"fail"}`, "tool"},
		{"repeated request_id", `{"tool":"echo","request_id":"a","request_id":"b"}`, "request_id"},
		{"repeated escaped name", `{"tool":"echo","t\u006fol":"fail"}`, "tool"},
		{"case variant of a field", `{"Tool":"echo"}`, "Tool"},
		{"case variant repeats a field", `{"tool":"echo","TOOL":"fail"}`, "TOOL"},
		{"case variant of request_id", `{"tool":"echo","Request_ID":"r1"}`, "Request_ID"},
		{"missing tool", `{"arguments":{}}`, "tool"},
		{"empty object", `{}`, "tool"},
		{"null body", `null`, "tool"},
		{"empty tool", `{"tool":""}`, "tool"},
		{"null tool", `{"tool":null}`, "tool"},
		{"empty request_id", `{"tool":"echo","request_id":""}`, "request_id"},
		{"timeout_ms 0", `{"tool":"echo","timeout_ms":0}`, "timeout_ms"},
		{"timeout_ms -1", `{"tool":"echo","timeout_ms":-1}`, "timeout_ms"},
		{"timeout_ms 1.5", `{"tool":"echo","timeout_ms":1.5}`, "timeout_ms"},
		{"timeout_ms string", `{"tool":"echo","timeout_ms":"5000"}`, "timeout_ms"},
		{"timeout_ms bool", `{"tool":"echo","timeout_ms":true}`, "timeout_ms"},
		{"timeout_ms object", `{"tool":"echo","timeout_ms":{}}`, "timeout_ms"},
		{"timeout_ms -0", `{"tool":"echo","timeout_ms":-0}`, "timeout_ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, srv, callPath, tc.body)
			e := wantError(t, a, http.StatusBadRequest, store.CodeInvalidRequest)
			if tc.field != "" && e["field"] != tc.field {
				t.Errorf("error.field = %v, want %q; body %s", e["field"], tc.field, a.body)
			}
		})
	}
}

func TestCallPassesFieldsToRuntime(t *testing.T) {
	var seen callSeen
	srv := newTestServer(t, &fakeRuntime{tb: t, call: seen.answer(engine.Response{Record: completedRecord()})}, api.Config{})
	cases := []struct {
		name, body string
		want       engine.Request
	}{
		{
			name: "everything",
			body: `{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"order-7f3",` +
				`"session_id":"sess-1","metadata":{"agent":"planner"},"timeout_ms":5000}`,
			want: engine.Request{
				Tool: "create_order", Arguments: []byte(`{"sku":"KB-01"}`), RequestID: "order-7f3",
				SessionID: "sess-1", Metadata: []byte(`{"agent":"planner"}`), Timeout: 5 * time.Second,
			},
		},
		{name: "tool only", body: `{"tool":"echo"}`, want: engine.Request{Tool: "echo"}},
		{name: "timeout_ms 250", body: `{"tool":"echo","timeout_ms":250}`, want: engine.Request{Tool: "echo", Timeout: 250 * time.Millisecond}},
		{
			name: "null arguments, metadata, request_id, session_id and timeout_ms",
			body: `{"tool":"echo","arguments":null,"metadata":null,"request_id":null,"session_id":null,"timeout_ms":null}`,
			want: engine.Request{Tool: "echo"},
		},
		// The runtime, not the api, checks that arguments is an object.
		{name: "arguments as string", body: `{"tool":"echo","arguments":"x"}`, want: engine.Request{Tool: "echo", Arguments: []byte(`"x"`)}},
		{name: "empty session_id", body: `{"tool":"echo","session_id":""}`, want: engine.Request{Tool: "echo"}},
		{name: "white space around", body: " \n{ \"tool\" : \"echo\" }\n ", want: engine.Request{Tool: "echo"}},
		{name: "escaped tool name", body: `{"tool":"ech\u006f"}`, want: engine.Request{Tool: "echo"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, srv, callPath, tc.body)
			wantJSON(t, a, http.StatusOK)
			got := seen.req.mustGet(t)
			if got.Tool != tc.want.Tool || got.RequestID != tc.want.RequestID || got.SessionID != tc.want.SessionID ||
				got.Timeout != tc.want.Timeout ||
				!bytes.Equal(got.Arguments, tc.want.Arguments) || !bytes.Equal(got.Metadata, tc.want.Metadata) {
				t.Errorf("runtime got %+v\nwant %+v", got, tc.want)
			}
			if len(tc.want.Arguments) == 0 && len(got.Arguments) != 0 {
				t.Errorf("arguments = %q, want empty", got.Arguments)
			}
		})
	}
}

func TestCallContentType(t *testing.T) {
	var seen callSeen
	srv := newTestServer(t, &fakeRuntime{tb: t, call: seen.answer(engine.Response{Record: completedRecord()})}, api.Config{})
	for _, tc := range []struct {
		contentType string
		status      int
	}{
		{"", http.StatusOK}, // a missing Content-Type is read as JSON
		{"application/json", http.StatusOK},
		{"application/json; charset=utf-8", http.StatusOK},
		{"Application/JSON", http.StatusOK},
		{"text/plain", http.StatusUnsupportedMediaType},
		{"text/plain; charset=utf-8", http.StatusUnsupportedMediaType},
		{"application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
		{"application/problem+json", http.StatusUnsupportedMediaType},
		{"not a media type;;", http.StatusUnsupportedMediaType},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			_, before := seen.req.get()
			a := send(t, srv, request{
				method: http.MethodPost, path: callPath, body: strings.NewReader(`{"tool":"echo"}`),
				header: map[string]string{"Content-Type": tc.contentType},
			})
			_, after := seen.req.get()
			if tc.status == http.StatusOK {
				wantJSON(t, a, http.StatusOK)
				if after != before+1 {
					t.Errorf("the runtime was not called")
				}
				return
			}
			wantError(t, a, tc.status, store.CodeUnsupportedMediaType)
			if after != before {
				t.Errorf("the runtime was called for Content-Type %q", tc.contentType)
			}
		})
	}
}

// unsized hides a reader's length, so that the client sends it chunked.
type unsized struct{ r io.Reader }

func (u unsized) Read(p []byte) (int, error) { return u.r.Read(p) }

// paddedCall returns a valid call body of exactly n bytes.
func paddedCall(t *testing.T, n int) string {
	t.Helper()
	const head, tail = `{"tool":"echo","arguments":{"pad":"`, `"}}`
	if n < len(head)+len(tail) {
		t.Fatalf("paddedCall(%d): too short", n)
	}
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

func TestCallBodyLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int64 // configured; 0 is the default
		size  int   // the effective limit
	}{
		{"default 1 MiB", 0, 1 << 20},
		{"configured 64 bytes", 64, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen callSeen
			rt := &fakeRuntime{tb: t, call: seen.answer(engine.Response{Record: completedRecord()})}
			s := mustNew(t, rt, api.Config{BodyLimit: tc.limit})
			var lengths last[int64]
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				lengths.set(r.ContentLength)
				s.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)

			for _, chunked := range []bool{false, true} {
				for _, size := range []int{tc.size, tc.size + 1, 4 * tc.size} {
					body := paddedCall(t, size)
					var r io.Reader = strings.NewReader(body)
					if chunked {
						r = unsized{r}
					}
					_, calls := seen.req.get()
					a := send(t, srv, request{method: http.MethodPost, path: callPath, body: r,
						header: map[string]string{"Content-Type": "application/json"}})
					if cl, _ := lengths.get(); chunked != (cl == -1) {
						t.Fatalf("chunked=%v but the server saw Content-Length %d", chunked, cl)
					}
					_, after := seen.req.get()
					if size <= tc.size {
						wantJSON(t, a, http.StatusOK)
						if after != calls+1 {
							t.Errorf("size %d, chunked=%v: the runtime was not called", size, chunked)
						}
						continue
					}
					wantError(t, a, http.StatusRequestEntityTooLarge, store.CodePayloadTooLarge)
					if after != calls {
						t.Errorf("size %d, chunked=%v: the runtime was called", size, chunked)
					}
				}
			}
		})
	}
}

func TestCallIdempotencyKeyHeader(t *testing.T) {
	var seen callSeen
	srv := newTestServer(t, &fakeRuntime{tb: t, call: seen.answer(engine.Response{Record: completedRecord()})}, api.Config{})

	t.Run("used as request_id", func(t *testing.T) {
		wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`, "Idempotency-Key", "key-1"), http.StatusOK)
		if got := seen.req.mustGet(t); got.RequestID != "key-1" {
			t.Errorf("RequestID = %q, want key-1", got.RequestID)
		}
	})
	t.Run("equal to the body's", func(t *testing.T) {
		wantJSON(t, post(t, srv, callPath, `{"tool":"echo","request_id":"key-2"}`, "Idempotency-Key", "key-2"), http.StatusOK)
		if got := seen.req.mustGet(t); got.RequestID != "key-2" {
			t.Errorf("RequestID = %q, want key-2", got.RequestID)
		}
	})

	// The api refuses a header that differs from the body's request_id,
	// or is empty, without asking the runtime ...
	srv = refusingServer(t, api.Config{})
	t.Run("different from the body's", func(t *testing.T) {
		wantField(t, post(t, srv, callPath, `{"tool":"echo","request_id":"a"}`, "Idempotency-Key", "b"), "request_id")
	})
	// ... and the runtime refuses the request_id a header gives when it
	// breaks the rules of one (1-255 visible ASCII characters).
	rules := newTestServer(t, newEngine(t), api.Config{})
	for _, tc := range []struct{ name, body, key string }{
		{"256 bytes", `{"tool":"echo"}`, strings.Repeat("k", 256)},
		{"256 bytes equal to the body's", `{"tool":"echo","request_id":"` + strings.Repeat("k", 256) + `"}`, strings.Repeat("k", 256)},
		{"with a space", `{"tool":"echo"}`, "a b"},
		{"non-ASCII", `{"tool":"echo"}`, "clé"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantField(t, post(t, rules, callPath, tc.body, "Idempotency-Key", tc.key), "request_id")
		})
	}
	t.Run("present but empty", func(t *testing.T) {
		r, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+callPath, strings.NewReader(`{"tool":"echo"}`))
		if err != nil {
			t.Fatal(err)
		}
		r.Header["Idempotency-Key"] = []string{""}
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		wantField(t, answer{status: resp.StatusCode, header: resp.Header, body: body}, "request_id")
	})
	t.Run("255 bytes", func(t *testing.T) {
		var seen callSeen
		srv := newTestServer(t, &fakeRuntime{tb: t, call: seen.answer(engine.Response{Record: completedRecord()})}, api.Config{})
		key := strings.Repeat("~", 255)
		wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`, "Idempotency-Key", key), http.StatusOK)
		if got := seen.req.mustGet(t); got.RequestID != key {
			t.Errorf("RequestID = %q, want the header's", got.RequestID)
		}
	})
}
