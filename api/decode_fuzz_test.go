package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
	"github.com/carmyhq/carmy/store/jcs"
)

// callSeeds are bodies for FuzzDecodeCall: valid calls, one of each error
// class, odd Unicode and deep nesting.
var callSeeds = []string{
	// valid
	`{"tool":"create_order","arguments":{"sku":"KB-01"},"request_id":"order-7f3","session_id":"sess-1","metadata":{"agent":"planner"},"timeout_ms":5000}`,
	`{"tool":"echo"}`,
	`{"tool":"echo","arguments":null,"metadata":null,"request_id":null,"session_id":null,"timeout_ms":null}`,
	`{"tool":"echo","arguments":"not an object"}`,
	`{"tool":"echo","timeout_ms":250}`,
	`{"tool":"echo","timeout_ms":9223372036854775807}`,
	`{"tool":"echo","timeout_ms":1e3}`,
	" \t\n{\"tool\" : \"echo\" } \n",
	`{"tool":"ech\u006f","request_id":"r\u0031"}`,
	// malformed, trailing data, not an object
	``, ` `, `{`, `{"tool":`, `{"tool" "x"}`, `{"tool":"echo"}{}`, `{"tool":"echo"} x`, `{"tool":"echo"}]`,
	`[]`, `null`, `"echo"`, `42`, `true`, `{"tool":"echo",}`, `{'tool':'echo'}`,
	// wrong types
	`{"tool":1}`, `{"tool":{}}`, `{"tool":["echo"]}`, `{"tool":"echo","request_id":7}`, `{"tool":"echo","session_id":false}`,
	// unknown, repeated and case-variant members
	`{"tool":"echo","requestId":"r"}`, `{"tool":"echo","tool":"fail"}`, `{"Tool":"echo"}`, `{"tool":"echo","TOOL":"x"}`,
	`{"tool":"echo","t\u006fol":"x"}`, `{"tool":"echo","ſession_id":"s"}`, `{"tool":"echo","\u212aey":"x"}`,
	// missing or empty members
	`{}`, `{"tool":""}`, `{"tool":null}`, `{"tool":"echo","request_id":""}`,
	// timeout_ms
	`{"tool":"echo","timeout_ms":0}`, `{"tool":"echo","timeout_ms":-1}`, `{"tool":"echo","timeout_ms":1.5}`,
	`{"tool":"echo","timeout_ms":"5000"}`, `{"tool":"echo","timeout_ms":-0}`, `{"tool":"echo","timeout_ms":99999999999999999999}`,
	// odd Unicode
	`{"tool":"\u00e9cho","request_id":"caf\u00e9"}`, "{\"tool\":\"e\xffcho\"}", "\xef\xbb\xbf{\"tool\":\"echo\"}",
	`{"tool":"\ud800"}`, "{\"tool\":\"echo\",\"arguments\":{\"\u202e\":\"\U0001F600\"}}", "{\"tool\":\"\x00\"}",
	// not I-JSON (RFC 7493), in members encoding/json takes as they are:
	// refused with or without a request_id
	`{"tool":"echo","arguments":{"a":1,"a":2}}`, `{"tool":"echo","metadata":{"x":[{"b":1,"b":2}]}}`,
	`{"tool":"echo","arguments":{"a":1,"\u0061":2}}`, "{\"tool\":\"echo\",\"arguments\":{\"a\":\"caf\xe9\"}}",
	"{\"tool\":\"echo\",\"arguments\":{\"caf\xe9\":1}}", `{"tool":"echo","arguments":{"a":"\ud800"}}`,
	`{"tool":"echo","arguments":{"a":"\udc00\ud800"}}`, `{"tool":"echo","session_id":"\udc00"}`,
	`{"tool":"echo","arguments":{"n":1e400}}`, `{"tool":"echo","metadata":{"n":-1E+999}}`, `{"tool":"echo","timeout_ms":1e400}`,
	`{"tool":"echo","arguments":` + strings.Repeat(`[`, 1001) + strings.Repeat(`]`, 1001) + `}`,
	`{"tool":1,"arguments":{"a":1,"a":2}}`, `{"arguments":{"a":1,"a":2},"tool":"\ud800"}`,
	// I-JSON at the edges: accepted
	`{"tool":"echo","arguments":{"s":"\ud83d\ude00","n":1e-400,"m":-0,"big":1.7976931348623157e308}}`,
	`{"tool":"echo","arguments":` + strings.Repeat(`[`, 1000) + strings.Repeat(`]`, 1000) + `}`,
	// deep nesting
	`{"tool":"echo","arguments":` + strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat(`}`, 200) + `}`,
	`{"tool":"echo","arguments":` + strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001) + `}`,
	strings.Repeat(`[`, 10001),
}

// FuzzDecodeCall checks decodeCall's contract on arbitrary bodies and
// Idempotency-Key values: it never panics; it fails only with an *Error of
// code INVALID_REQUEST; and what it accepts is one JSON object of the
// known members whose values the Request carries faithfully.
func FuzzDecodeCall(f *testing.F) {
	for _, body := range callSeeds {
		f.Add([]byte(body), "")
	}
	f.Add([]byte(`{"tool":"echo"}`), "key-1")
	f.Add([]byte(`{"tool":"echo","request_id":"key-1"}`), "key-1")
	f.Add([]byte(`{"tool":"echo","request_id":"a"}`), "b")
	f.Add([]byte(`{"tool":"echo","request_id":""}`), "b")

	f.Fuzz(func(t *testing.T, body []byte, idemKey string) {
		req, err := decodeCall(body, idemKey)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not an *api.Error", err, err)
			}
			if e.Code != store.CodeInvalidRequest {
				t.Fatalf("error code = %q, want INVALID_REQUEST: %v", e.Code, err)
			}
			if e.Message == "" {
				t.Fatalf("error without a message")
			}
			if f, ok := e.Extra["field"]; ok {
				if _, isString := f.(string); !isString {
					t.Fatalf("field is %v (%T), want a string", f, f)
				}
			}
			return
		}

		// What was accepted is exactly one valid JSON object ...
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(body, &members); err != nil || members == nil {
			t.Fatalf("accepted a body that is not an object: %q (%v)", body, err)
		}
		// ... of known members, spelt exactly, each of them I-JSON as
		// the fingerprint of a recorded call requires: a call without
		// request_id is decoded as strictly as one with.
		for name, raw := range members {
			switch name {
			case "tool", "arguments", "request_id", "session_id", "metadata", "timeout_ms":
			default:
				t.Fatalf("accepted unknown member %q in %q", name, body)
			}
			if _, err := jcs.AppendCanonical(nil, raw); err != nil {
				t.Fatalf("accepted member %q that is not I-JSON in %q: %v", name, body, err)
			}
		}

		if req.Tool == "" {
			t.Fatalf("accepted an empty tool: %q", body)
		}
		if tool := stringMember(t, members["tool"]); tool != req.Tool {
			t.Fatalf("Tool = %q, body says %q", req.Tool, tool)
		}
		if sess := stringMember(t, members["session_id"]); sess != req.SessionID {
			t.Fatalf("SessionID = %q, body says %q", req.SessionID, sess)
		}
		// The body's request_id is passed on (the runtime checks its
		// form); the header, when set, is the request_id.
		rid := stringMember(t, members["request_id"])
		switch {
		case idemKey != "" && req.RequestID != idemKey:
			t.Fatalf("RequestID = %q, want the Idempotency-Key %q", req.RequestID, idemKey)
		case idemKey != "" && rid != "" && rid != idemKey:
			t.Fatalf("accepted request_id %q and Idempotency-Key %q", rid, idemKey)
		case idemKey == "" && req.RequestID != rid:
			t.Fatalf("RequestID = %q, body says %q", req.RequestID, rid)
		}
		if raw, ok := members["request_id"]; ok && string(raw) != "null" && rid == "" {
			t.Fatalf("accepted an empty request_id: %q", body)
		}

		for name, got := range map[string]json.RawMessage{"arguments": req.Arguments, "metadata": req.Metadata} {
			raw, present := members[name]
			if !present || string(raw) == "null" {
				if len(got) != 0 {
					t.Fatalf("%s = %q, want empty for %q", name, got, raw)
				}
				continue
			}
			if !bytes.Equal(got, raw) {
				t.Fatalf("%s = %q, want the body's %q", name, got, raw)
			}
		}

		raw, present := members["timeout_ms"]
		if !present || string(raw) == "null" {
			if req.Timeout != 0 {
				t.Fatalf("Timeout = %v without timeout_ms", req.Timeout)
			}
			return
		}
		var ms json.Number
		if err := json.Unmarshal(raw, &ms); err != nil {
			t.Fatalf("accepted timeout_ms %s: %v", raw, err)
		}
		n, err := ms.Float64()
		if err != nil || n < 1 || n != math.Trunc(n) {
			t.Fatalf("accepted timeout_ms %s", raw)
		}
		want := engine.MaxTimeout
		if n < float64(engine.MaxTimeout/time.Millisecond) {
			want = time.Duration(n) * time.Millisecond
		}
		if req.Timeout != want {
			t.Fatalf("Timeout = %v for timeout_ms %s, want %v", req.Timeout, raw, want)
		}
	})
}

// stringMember decodes a member the decoder accepted as a string or null.
func stringMember(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if len(raw) == 0 {
		return ""
	}
	var s *string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("accepted %s as a string: %v", raw, err)
	}
	if s == nil {
		return ""
	}
	return *s
}

func TestDecodeCallTimeoutCap(t *testing.T) {
	for _, tc := range []struct {
		ms   string
		want time.Duration
	}{
		{"1", time.Millisecond},
		{"86400000", engine.MaxTimeout},
		{"86400001", engine.MaxTimeout},
		{"9223372036854775807", engine.MaxTimeout},
	} {
		req, err := decodeCall([]byte(`{"tool":"echo","timeout_ms":`+tc.ms+`}`), "")
		if err != nil || req.Timeout != tc.want {
			t.Errorf("timeout_ms %s: Timeout = %v, %v; want %v", tc.ms, req.Timeout, err, tc.want)
		}
	}
}

func TestDecodeStrictReportsFields(t *testing.T) {
	for _, tc := range []struct{ body, field string }{
		{`{"tool":1}`, "tool"},
		{`{"requestId":"r"}`, "requestId"},
		{`{"tool":"a","tool":"b"}`, "tool"},
		{`{"Tool":"a"}`, "Tool"},
		{`{"tool":"a","Request_Id":"r"}`, "Request_Id"},
	} {
		var b callBody
		err := decodeStrict([]byte(tc.body), &b)
		var e *Error
		if !errors.As(err, &e) || e.Code != store.CodeInvalidRequest || e.Extra["field"] != tc.field {
			t.Errorf("decodeStrict(%s) = %v, want INVALID_REQUEST with field %q", tc.body, err, tc.field)
		}
	}
	var empty struct{}
	if err := decodeStrict([]byte(`{"x":1}`), &empty); err == nil {
		t.Errorf("decodeStrict into struct{} accepted a member")
	}
	if err := decodeStrict([]byte(`{}`), &empty); err != nil {
		t.Errorf("decodeStrict({}) = %v", err)
	}
}
