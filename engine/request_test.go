package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/carmyhq/carmy/store"
)

func TestTimeoutOfMS(t *testing.T) {
	for _, c := range []struct {
		ms   float64
		want time.Duration
		ok   bool
	}{
		{1, time.Millisecond, true},
		{1500, 1500 * time.Millisecond, true},
		{86_399_999, 86_399_999 * time.Millisecond, true},
		{86_400_000, MaxTimeout, true},
		{1e300, MaxTimeout, true},
		{0, 0, false},
		{-5, 0, false},
		{1.5, 0, false},
	} {
		got, ok := TimeoutOfMS(c.ms)
		if got != c.want || ok != c.ok {
			t.Errorf("TimeoutOfMS(%v) = %v, %v; want %v, %v", c.ms, got, ok, c.want, c.ok)
		}
	}
}

func TestNullIsAbsent(t *testing.T) {
	for raw, want := range map[string]string{"null": "", " null\n": "", `{"a":null}`: `{"a":null}`, `"null"`: `"null"`} {
		if got := NullIsAbsent(json.RawMessage(raw)); string(got) != want || (want == "" && got != nil) {
			t.Errorf("NullIsAbsent(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestRequestEnded(t *testing.T) {
	for _, err := range []error{context.Canceled, fmt.Errorf("call: %w", context.DeadlineExceeded)} {
		got, ok := RequestEnded(err)
		if !ok || store.CodeOf(got) != store.CodeUnavailable || got.Error() != "the request ended before an answer: "+err.Error() {
			t.Errorf("RequestEnded(%v) = %v, %v", err, got, ok)
		}
	}
	other := errors.New("disk on fire")
	if got, ok := RequestEnded(other); ok || got != other {
		t.Errorf("RequestEnded(other) = %v, %v", got, ok)
	}
}

// TestRequestOf: both forms of a member (decoded and JSON text) make the
// same Request, null is absent, and every refusal is INVALID_REQUEST
// naming the field and speaking of the transport's own name.
func TestRequestOf(t *testing.T) {
	raw := func(s string) *json.RawMessage { r := json.RawMessage(s); return &r }
	str := func(s string) *string { return &s }
	mcpNames := &MemberNames{Tool: "name", RequestID: "carmy/request_id", SessionID: "carmy/session_id", Metadata: "carmy/metadata", TimeoutMS: "carmy/timeout_ms"}
	for _, w := range []RawCall{
		{Tool: "echo", Arguments: *raw(`{"a":1}`), RequestID: "r-1", SessionID: "s", Metadata: map[string]any{"k": "v"}, TimeoutMS: 1500.0},
		{Tool: "echo", Arguments: *raw(`{"a":1}`), RequestID: raw(`"r-1"`), SessionID: str("s"), Metadata: raw(`{"k":"v"}`), TimeoutMS: raw(`1.5e3`)},
	} {
		req, err := RequestOf(w)
		if err != nil || req.Tool != "echo" || string(req.Arguments) != `{"a":1}` || req.RequestID != "r-1" || req.SessionID != "s" ||
			string(req.Metadata) != `{"k":"v"}` || req.Timeout != 1500*time.Millisecond {
			t.Errorf("RequestOf(%+v) = %+v, %v", w, req, err)
		}
	}
	for _, w := range []RawCall{
		{Tool: "echo", Arguments: *raw(`null`), RequestID: (*string)(nil), Metadata: raw(`null`), TimeoutMS: raw(``), SessionID: raw(` null `)},
		{Tool: "echo", Metadata: (*json.RawMessage)(nil), TimeoutMS: nil},
		{Tool: "echo"},
	} {
		req, err := RequestOf(w)
		if err != nil || req.Arguments != nil || req.RequestID != "" || req.SessionID != "" || req.Metadata != nil || req.Timeout != 0 {
			t.Errorf("RequestOf(%+v) = %+v, %v; want every member absent", w, req, err)
		}
	}
	for _, c := range []struct {
		w            RawCall
		field, words string
	}{
		{RawCall{}, "tool", `"tool" is required`},
		{RawCall{Names: mcpNames}, "tool", `"name" is required`},
		{RawCall{Tool: "echo", RequestID: 5.0, Names: mcpNames}, "request_id", `"carmy/request_id" must be a string`},
		{RawCall{Tool: "echo", RequestID: str("")}, "request_id", `"request_id" must not be empty; omit it to call without idempotency`},
		{RawCall{Tool: "echo", RequestID: raw(`""`)}, "request_id", `"request_id" must not be empty`},
		{RawCall{Tool: "echo", SessionID: true, Names: mcpNames}, "session_id", `"carmy/session_id" must be a string`},
		{RawCall{Tool: "echo", Metadata: []any{1.0}, Names: mcpNames}, "metadata", `"carmy/metadata" must be a JSON object`},
		{RawCall{Tool: "echo", Metadata: raw(` [1]`)}, "metadata", `"metadata" must be a JSON object`},
		{RawCall{Tool: "echo", TimeoutMS: 1.5, Names: mcpNames}, "timeout_ms", `"carmy/timeout_ms" must be a positive integer`},
		{RawCall{Tool: "echo", TimeoutMS: raw(`"100"`)}, "timeout_ms", `"timeout_ms" must be a positive integer`},
		{RawCall{Tool: "echo", TimeoutMS: raw(`0`)}, "timeout_ms", `"timeout_ms" must be a positive integer`},
		{RawCall{Tool: "echo", TimeoutMS: "100"}, "timeout_ms", `"timeout_ms" must be a positive integer`},
	} {
		_, err := RequestOf(c.w)
		var fe *store.FieldError
		if store.CodeOf(err) != store.CodeInvalidRequest || !errors.As(err, &fe) || fe.Field != c.field || !strings.HasPrefix(fe.Err.Error(), c.words) {
			t.Errorf("RequestOf(%+v) = %v; want INVALID_REQUEST of field %s saying %s", c.w, err, c.field, c.words)
		}
	}
}
