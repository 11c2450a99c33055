package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/api"
)

// TestIdempotencyKeyStructuredString: the header in the IETF draft's form,
// an RFC 8941 String, names the same identity as the bare header and the
// body's request_id (issue 18, finding 12: the quotes were taken as part
// of the request_id, so a draft-following client's retry through another
// form ran the tool again).
func TestIdempotencyKeyStructuredString(t *testing.T) {
	srv := newTestServer(t, newEngine(t), api.Config{})
	first := wantJSON(t, post(t, srv, callPath, `{"tool":"echo","arguments":{"n":1}}`, "Idempotency-Key", `"order-7f3"`), http.StatusOK)
	if first["request_id"] != "order-7f3" || first["replayed"] != false {
		t.Fatalf("first call = %v, want request_id order-7f3, not replayed", first)
	}
	for _, tc := range []struct{ name, body, key string }{
		{"bare header", `{"tool":"echo","arguments":{"n":1}}`, "order-7f3"},
		{"String with spaces around", `{"tool":"echo","arguments":{"n":1}}`, ` "order-7f3" `},
		{"body", `{"tool":"echo","arguments":{"n":1},"request_id":"order-7f3"}`, ""},
		{"String and body", `{"tool":"echo","arguments":{"n":1},"request_id":"order-7f3"}`, `"order-7f3"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var kv []string
			if tc.key != "" {
				kv = []string{"Idempotency-Key", tc.key}
			}
			got := wantJSON(t, post(t, srv, callPath, tc.body, kv...), http.StatusOK)
			if got["replayed"] != true || got["execution_id"] != first["execution_id"] {
				t.Errorf("answer = %v, want a replay of %v", got, first["execution_id"])
			}
		})
	}
	t.Run("escapes", func(t *testing.T) {
		got := wantJSON(t, post(t, srv, callPath, `{"tool":"echo"}`, "Idempotency-Key", `"a\"b\\c"`), http.StatusOK)
		if got["request_id"] != `a"b\c` {
			t.Errorf("request_id = %v, want a\"b\\c", got["request_id"])
		}
	})
	for _, tc := range []struct{ name, key string }{
		{"no closing quote", `"order-7f3`},
		{"a bad escape", `"a\nb"`},
		{"parameters after it", `"order-7f3";v=1`},
		{"a second item", `"a", "b"`},
		{"an empty String", `""`},
		{"a tab inside", "\"a\tb\""},
		{"non-ASCII inside", `"clé"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantField(t, post(t, srv, callPath, `{"tool":"echo"}`, "Idempotency-Key", tc.key), "request_id")
		})
	}
	t.Run("sent twice", func(t *testing.T) {
		r, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+callPath, strings.NewReader(`{"tool":"echo"}`))
		if err != nil {
			t.Fatal(err)
		}
		r.Header["Idempotency-Key"] = []string{"a", "a"}
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		wantField(t, answer{status: resp.StatusCode, header: resp.Header, body: body}, "request_id")
	})
}

// FuzzParseSFString: the String parser never panics, and what it accepts
// round-trips: quoting the value again (escaping `"` and `\`) gives the
// input back, and the value holds only what a String may hold.
func FuzzParseSFString(f *testing.F) {
	for _, s := range []string{`"a"`, `""`, `"a\"b"`, `"a\\"`, `"a`, `"a\x"`, `"a";p`, `"é"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !strings.HasPrefix(s, `"`) {
			return
		}
		v, ok := api.ParseSFString(s)
		if !ok {
			return
		}
		again := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
		if again != s {
			t.Fatalf("parse(%q) = %q, which quotes back as %q", s, v, again)
		}
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] > 0x7e {
				t.Fatalf("parse(%q) = %q holds byte %#x", s, v, v[i])
			}
		}
	})
}
