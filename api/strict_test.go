package api_test

import (
	"strings"
	"testing"

	"github.com/carmyhq/carmy/api"
)

// notIJSON are member values that encoding/json takes but RFC 8785
// canonicalisation (the fingerprint of a recorded call) refuses: what a
// strict decoder must refuse in every call (docs/api.md#calling-a-tool-post-v1toolscall, issue 14 finding 5).
var notIJSON = []struct{ name, value string }{
	{"duplicate key", `{"a":1,"a":2}`},
	{"nested duplicate key", `{"x":[{"b":true,"b":false}]}`},
	{"duplicate key spelt with an escape", `{"a":1,"\u0061":2}`},
	{"invalid UTF-8", "{\"a\":\"caf\xe9\"}"},
	{"invalid UTF-8 in a name", "{\"caf\xe9\":1}"},
	{"lone high surrogate", `{"a":"\ud800"}`},
	{"lone low surrogate", `{"a":"x\udc00y"}`},
	{"reversed surrogate pair", `{"a":"\udc00\ud800"}`},
	{"huge exponent", `{"a":1e400}`},
	{"huge negative exponent", `{"a":-1.5E+999}`},
	{"nested too deep", strings.Repeat(`{"a":`, 1001) + `1` + strings.Repeat(`}`, 1001)},
}

// TestCallStrictWithoutRequestID checks that a call is decoded as strictly
// without a request_id as with one: a member that is not I-JSON is 400
// INVALID_REQUEST naming it, and the runtime never sees the call
// (refusingServer fails the test when it does).
func TestCallStrictWithoutRequestID(t *testing.T) {
	srv := refusingServer(t, api.Config{})
	for _, tc := range notIJSON {
		for _, member := range []string{"arguments", "metadata"} {
			for _, rid := range []string{``, `,"request_id":"r-1"`} {
				body := `{"tool":"echo","` + member + `":` + tc.value + rid + `}`
				t.Run(tc.name+"/"+member+rid, func(t *testing.T) {
					wantField(t, post(t, srv, callPath, body), member)
				})
			}
		}
	}
	for _, tc := range []struct{ name, body, field string }{
		{"invalid UTF-8 in tool", "{\"tool\":\"ech\xf8\"}", "tool"},
		{"lone surrogate in tool", `{"tool":"echo\ud800"}`, "tool"},
		{"lone surrogate in session_id", `{"tool":"echo","session_id":"\udfff"}`, "session_id"},
		{"invalid UTF-8 in request_id", "{\"tool\":\"echo\",\"request_id\":\"r\xff\"}", "request_id"},
		{"huge timeout_ms", `{"tool":"echo","timeout_ms":1e400}`, "timeout_ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantField(t, post(t, srv, callPath, tc.body), tc.field)
		})
	}
}

// TestResolveStrict checks that a resolution is decoded as strictly as a
// call: its data and error are recorded and replayed.
func TestResolveStrict(t *testing.T) {
	srv := refusingServer(t, api.Config{})
	for _, tc := range notIJSON {
		t.Run(tc.name+"/data", func(t *testing.T) {
			wantField(t, post(t, srv, "/v1/executions/exec_4/resolve", `{"status":"completed","data":`+tc.value+`}`), "data")
		})
		t.Run(tc.name+"/error", func(t *testing.T) {
			wantField(t, post(t, srv, "/v1/executions/exec_4/resolve", `{"status":"failed","error":`+tc.value+`}`), "error")
		})
	}
	wantField(t, post(t, srv, "/v1/executions/exec_4/resolve", `{"status":"rel\ud800eased"}`), "status")
}
