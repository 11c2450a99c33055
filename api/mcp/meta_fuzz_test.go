package mcp

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// FuzzRequestOf feeds requestOf the _meta a client may send (decoded as
// the SDK decodes it) and arbitrary arguments: it never panics; it
// answers a request whose request_id is the key's string, or an
// INVALID_REQUEST naming one of the call's fields; and the request's
// metadata, when set, is a JSON object.
func FuzzRequestOf(f *testing.F) {
	for _, seed := range []struct{ meta, args, session string }{
		{`{"carmy/request_id":"order-7f3","carmy/session_id":"s","carmy/metadata":{"agent":"planner"},"carmy/timeout_ms":5000}`, `{"sku":"KB-01"}`, ""},
		{`{"carmy/request_id":5}`, `{}`, "hdr"},
		{`{"carmy/request_id":""}`, `null`, ""},
		{`{"carmy/request_id":null,"carmy/session_id":null}`, ``, "h"},
		{`{"carmy/timeout_ms":1.5}`, `[]`, ""},
		{`{"carmy/timeout_ms":1e300}`, `{"a":1}`, ""},
		{`{"carmy/metadata":[1]}`, `{}`, ""},
		{`{"progressToken":1,"other":{"x":[]}}`, `{}`, ""},
	} {
		f.Add(seed.meta, seed.args, seed.session)
	}
	fields := map[string]bool{"request_id": true, "session_id": true, "metadata": true, "timeout_ms": true}
	f.Fuzz(func(t *testing.T, metaJSON, args, session string) {
		var meta map[string]any
		if json.Unmarshal([]byte(metaJSON), &meta) != nil {
			return
		}
		header := http.Header{}
		header.Set(SessionHeader, session)
		req, err := requestOf("echo", json.RawMessage(args), meta, header)
		if err != nil {
			var fe *store.FieldError
			if store.CodeOf(err) != store.CodeInvalidRequest || !errors.As(err, &fe) || !fields[fe.Field] {
				t.Fatalf("error %v (%T), want INVALID_REQUEST naming a call's field", err, err)
			}
			return
		}
		if v, ok := meta[MetaRequestID].(string); ok && req.RequestID != v || !ok && req.RequestID != "" {
			t.Fatalf("request_id %q from _meta %s", req.RequestID, metaJSON)
		}
		if _, ok := meta[MetaSessionID].(string); !ok && meta[MetaSessionID] == nil && req.SessionID != header.Get(SessionHeader) {
			t.Fatalf("session %q, want the header's %q", req.SessionID, header.Get(SessionHeader))
		}
		if req.Metadata != nil && !json.Valid(req.Metadata) {
			t.Fatalf("metadata %q is not JSON", req.Metadata)
		}
		if req.Timeout < 0 || req.Timeout > engine.MaxTimeout {
			t.Fatalf("timeout %v", req.Timeout)
		}
	})
}

// FuzzResultOf checks that any recorded outcome becomes a result whose
// structuredContent is a JSON object and whose text is valid JSON.
func FuzzResultOf(f *testing.F) {
	f.Add(`{"order_id":1}`, true)
	f.Add(`[1,2]`, true)
	f.Add(`"text"`, true)
	f.Add(`{"code":"TOOL_ERROR","message":"x"}`, false)
	f.Add(`null`, false)
	f.Fuzz(func(t *testing.T, raw string, completed bool) {
		if !json.Valid([]byte(raw)) {
			return
		}
		rec := store.Record{ExecutionID: "exec_x", Status: store.StatusFailed, Error: json.RawMessage(raw)}
		if completed {
			rec.Status, rec.Data, rec.Error = store.StatusCompleted, json.RawMessage(raw), nil
		}
		res := resultOf(engine.Response{Record: rec})
		sc, err := json.Marshal(res.StructuredContent)
		var obj map[string]any
		if err != nil || json.Unmarshal(sc, &obj) != nil {
			t.Fatalf("structuredContent %s is not a JSON object (%v)", sc, err)
		}
		if res.IsError == completed {
			t.Fatalf("isError %v for status %s", res.IsError, rec.Status)
		}
		b, err := json.Marshal(res)
		if err != nil || !json.Valid(b) {
			t.Fatalf("result does not encode: %v", err)
		}
	})
}
