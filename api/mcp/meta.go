package mcp

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/store"
)

// The keys of params._meta that Carmy reads (docs/mcp.md). Every other key,
// the protocol's own included, is ignored: none enters the fingerprint.
const (
	MetaRequestID = "carmy/request_id"
	MetaSessionID = "carmy/session_id"
	MetaMetadata  = "carmy/metadata"
	MetaTimeoutMS = "carmy/timeout_ms"
)

// metaPrefix begins every _meta key of Carmy's own.
const metaPrefix = "carmy/"

// The keys of a result's _meta.
const (
	MetaExecutionID = "carmy/execution_id"
	MetaStatus      = "carmy/status"
	MetaReplayed    = "carmy/replayed"
	// MetaRecorded is false, and present, only in the result of a call of
	// a read-only tool, which nothing reserved or recorded.
	MetaRecorded  = "carmy/recorded"
	MetaErrorCode = "carmy/error_code"
)

// metaNames are the names of a call's members in a tools/call: the
// tool's is params.name, the others Carmy's keys of _meta.
var metaNames = engine.MemberNames{Tool: "name", RequestID: MetaRequestID, SessionID: MetaSessionID, Metadata: MetaMetadata, TimeoutMS: MetaTimeoutMS}

// requestOf builds the runtime's request of a tools/call from the tool,
// its arguments and Carmy's keys of _meta (a null is absent), by the
// rules POST /v1/tools/call follows (engine.RequestOf). Its errors are
// INVALID_REQUEST naming the call's field, as over HTTP: tool,
// request_id, session_id, metadata, timeout_ms.
//
// header is the HTTP request's (nil when there is none): its
// Carmy-Session-Id names the session when _meta does not.
func requestOf(tool string, args json.RawMessage, meta map[string]any, header http.Header) (engine.Request, error) {
	req, err := engine.RequestOf(engine.RawCall{Tool: tool, Arguments: args, Names: &metaNames,
		RequestID: meta[MetaRequestID], SessionID: meta[MetaSessionID], Metadata: meta[MetaMetadata], TimeoutMS: meta[MetaTimeoutMS]})
	if meta[MetaSessionID] == nil && header != nil {
		req.SessionID = header.Get(SessionHeader)
	}
	return req, err
}

// invalidField is an INVALID_REQUEST refusal naming field.
func invalidField(field, msg string) error {
	return &store.FieldError{Field: field, Err: fmt.Errorf("%s", msg)}
}
