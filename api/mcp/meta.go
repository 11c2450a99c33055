package mcp

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// The keys of params._meta that Carmy reads (SPEC §5.1). Every other key,
// the protocol's own included, is ignored: none enters the fingerprint.
const (
	MetaRequestID = "carmy/request_id"
	MetaSessionID = "carmy/session_id"
	MetaMetadata  = "carmy/metadata"
	MetaTimeoutMS = "carmy/timeout_ms"
)

// The keys of a result's _meta.
const (
	MetaExecutionID = "carmy/execution_id"
	MetaStatus      = "carmy/status"
	MetaReplayed    = "carmy/replayed"
	MetaErrorCode   = "carmy/error_code"
)

// requestOf builds the runtime's request of a tools/call: the tool, its
// arguments, and Carmy's keys of _meta, checked for their JSON types as
// POST /v1/tools/call checks its members (a null is absent; an empty
// request_id is refused, never read as absent). The runtime checks the
// rest. The errors are INVALID_REQUEST naming the call's field, as over
// HTTP: request_id, session_id, metadata, timeout_ms.
//
// header is the HTTP request's (nil when there is none): its
// Carmy-Session-Id names the session when _meta does not.
func requestOf(tool string, args json.RawMessage, meta map[string]any, header http.Header) (engine.Request, error) {
	req := engine.Request{Tool: tool, Arguments: engine.NullIsAbsent(args)}
	if v, ok := present(meta, MetaRequestID); ok {
		s, isString := v.(string)
		switch {
		case !isString:
			return req, invalidField("request_id", fmt.Sprintf("%q must be a string", MetaRequestID))
		case s == "":
			return req, invalidField("request_id", fmt.Sprintf("%q must not be empty; omit it to call without idempotency", MetaRequestID))
		}
		req.RequestID = s
	}
	if v, ok := present(meta, MetaSessionID); ok {
		s, isString := v.(string)
		if !isString {
			return req, invalidField("session_id", fmt.Sprintf("%q must be a string", MetaSessionID))
		}
		req.SessionID = s
	} else if header != nil {
		req.SessionID = header.Get(SessionHeader)
	}
	if v, ok := present(meta, MetaMetadata); ok {
		m, isObject := v.(map[string]any)
		if !isObject {
			return req, invalidField("metadata", fmt.Sprintf("%q must be a JSON object", MetaMetadata))
		}
		raw, err := json.Marshal(m)
		if err != nil {
			return req, invalidField("metadata", fmt.Sprintf("%q: %v", MetaMetadata, err))
		}
		req.Metadata = raw
	}
	if v, ok := present(meta, MetaTimeoutMS); ok {
		// Capped at engine.MaxTimeout, as timeout_ms is over HTTP.
		ms, isNumber := v.(float64)
		timeout, ok := engine.TimeoutOfMS(ms)
		if !isNumber || !ok {
			return req, invalidField("timeout_ms", fmt.Sprintf("%q must be a positive integer", MetaTimeoutMS))
		}
		req.Timeout = timeout
	}
	return req, nil
}

// present returns meta[key] unless it is absent or null.
func present(meta map[string]any, key string) (any, bool) {
	v, ok := meta[key]
	return v, ok && v != nil
}

// invalidField is an INVALID_REQUEST refusal naming field.
func invalidField(field, msg string) error {
	return &store.FieldError{Field: field, Err: fmt.Errorf("%s", msg)}
}
