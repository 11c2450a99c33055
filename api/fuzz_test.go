package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/api"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// FuzzServerCall posts arbitrary bytes, with an arbitrary Content-Type and
// Idempotency-Key, to the real handler over a runtime that answers one
// fixed record. Whatever comes in, the answer is JSON with a status of 200,
// 400, 413 or 415, and every non-200 answer is the envelope of docs/errors.md.
func FuzzServerCall(f *testing.F) {
	seeds := []string{
		`{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"order-7f3","session_id":"sess-1","metadata":{"agent":"planner"},"timeout_ms":5000}`,
		`{"tool":"echo"}`, ``, `{`, `{"tool":1}`, `{"tool":"echo"}{}`, `{"tool":"echo","requestId":"r"}`,
		`{"tool":"echo","tool":"x"}`, `{"Tool":"echo"}`, `{"tool":"echo","request_id":""}`,
		`{"tool":"echo","timeout_ms":0}`, `{"tool":"echo","timeout_ms":"5000"}`, `[]`, `null`,
		"{\"tool\":\"e\xffcho\"}", `{"tool":"\ud800"}`,
		`{"tool":"echo","arguments":` + strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001) + `}`,
		`{"tool":"echo","arguments":{"pad":"` + strings.Repeat("x", 300) + `"}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), "application/json", "")
	}
	f.Add([]byte(`{"tool":"echo"}`), "", "key-1")
	f.Add([]byte(`{"tool":"echo"}`), "text/plain", "")
	f.Add([]byte(`{"tool":"echo"}`), "application/json; charset=utf-8", "a b")
	f.Add([]byte(`{"tool":"echo","request_id":"a"}`), "application/json", "b")
	f.Add([]byte(`{"tool":"echo"}`), ";;", strings.Repeat("k", 256))

	rt := &fakeRuntime{call: func(context.Context, engine.Caller, engine.Request) (engine.Response, error) {
		return engine.Response{Record: completedRecord()}, nil
	}}
	// A small limit lets the fuzzer reach PAYLOAD_TOO_LARGE.
	s, err := api.New(rt, api.Config{BodyLimit: 256, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, body []byte, contentType, idemKey string) {
		r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/tools/call", bytes.NewReader(body))
		r.Host = "127.0.0.1" // not httptest's example.com, which the Host check refuses
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		if idemKey != "" {
			r.Header.Set("Idempotency-Key", idemKey)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		resp := w.Result()
		got, _ := io.ReadAll(resp.Body)

		if !json.Valid(got) {
			t.Fatalf("answer %d is not JSON: %q", resp.StatusCode, got)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("Content-Type = %q", ct)
		}
		switch resp.StatusCode {
		case http.StatusOK:
			var ok struct {
				ExecutionID string `json:"execution_id"`
			}
			if err := json.Unmarshal(got, &ok); err != nil || ok.ExecutionID == "" {
				t.Fatalf("200 without an execution: %q", got)
			}
			return
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		default:
			t.Fatalf("status %d: %q", resp.StatusCode, got)
		}
		var env map[string]json.RawMessage
		if err := json.Unmarshal(got, &env); err != nil || len(env) != 1 {
			t.Fatalf("not an envelope: %q", got)
		}
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(env["error"], &e); err != nil || e.Code == "" || e.Message == "" {
			t.Fatalf("envelope without a code or message: %q", got)
		}
		want := map[int]string{
			http.StatusBadRequest:            store.CodeInvalidRequest,
			http.StatusRequestEntityTooLarge: store.CodePayloadTooLarge,
			http.StatusUnsupportedMediaType:  store.CodeUnsupportedMediaType,
		}[resp.StatusCode]
		if e.Code != want {
			t.Fatalf("status %d with code %q, want %q", resp.StatusCode, e.Code, want)
		}
	})
}
