package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/carmyhq/carmy/api/internal/strictjson"
	"github.com/carmyhq/carmy/engine"
	"github.com/carmyhq/carmy/internal/iobuf"
	"github.com/carmyhq/carmy/store"
)

// DefaultBodyLimit bounds a request body.
const DefaultBodyLimit = 1 << 20

// readBody reads the request's body as readBody does, within the
// server's body timeout.
func (s *Server) readBody(c echo.Context) ([]byte, error) {
	// The body must arrive within bodyTimeout. The deadline is lifted
	// once the body is read, so it never cuts a call whose tool runs
	// longer; after a failed read it stays, so the server does not wait
	// for the rest of the body before it answers and closes.
	rc := http.NewResponseController(c.Response().Writer)
	set := rc.SetReadDeadline(time.Now().Add(s.bodyTimeout)) == nil
	body, err := readBody(c, s.limit)
	if set && err == nil {
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, err
}

// readBody checks the Content-Type and reads the body within limit.
// An empty body is returned as nil.
func readBody(c echo.Context, limit int64) ([]byte, error) {
	req := c.Request()
	if req.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	body, err := readAll(req.ContentLength, io.LimitReader(req.Body, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		return nil, &Error{Code: store.CodeInvalidRequest, Message: "reading the body failed", Err: err}
	}
	if int64(len(body)) > limit {
		return nil, tooLarge(limit)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	if ct := req.Header.Get(echo.HeaderContentType); ct != "" && ct != echo.MIMEApplicationJSON {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != echo.MIMEApplicationJSON {
			return nil, newError(store.CodeUnsupportedMediaType, fmt.Sprintf("the body must be application/json, not %q", ct))
		}
	}
	return body, nil
}

// readAll is io.ReadAll into a buffer of the size the body declares
// (size < 0: unknown), so that a body of the declared size is read in one
// allocation of its size rather than grown from 512 bytes.
func readAll(size int64, r io.Reader) ([]byte, error) {
	if size < 0 || size >= 1<<20 {
		return io.ReadAll(r)
	}
	// One byte more than declared: the read that finds the end needs room.
	return iobuf.ReadAppend(make([]byte, 0, size+1), r, 0)
}

func tooLarge(limit int64) error {
	return newError(store.CodePayloadTooLarge, fmt.Sprintf("the body is over the limit of %d bytes", limit))
}

// decodeStrict decodes one JSON object from body into v: unknown fields,
// repeated fields, wrong types and trailing data are INVALID_REQUEST.
func decodeStrict(body []byte, v any) error {
	return decodeStrictKeep(body, v, nil)
}

// decodeStrictKeep is decodeStrict that keeps, in keep when it is not nil,
// the canonical forms of the arguments and metadata it checks.
func decodeStrictKeep(body []byte, v any, keep *canonicalMembers) error {
	if len(body) == 0 {
		return newError(store.CodeInvalidRequest, "the body is empty; a JSON object is required")
	}
	// The common case, a well-formed object, takes one scan of its
	// syntax and members, one decode and the I-JSON check of its values.
	// Anything else takes the slow path below, which words each kind of
	// error. Both refuse the same bodies with the same code and field
	// (FuzzDecodeStrictPaths).
	if ms, ok := objectMembers(body); ok {
		if err := checkNames(ms, jsonNames(v)); err != nil {
			return err
		}
		if err := json.Unmarshal(body, v); err != nil {
			return decodeError(err)
		}
		return checkStrictKeep(ms, keep)
	}
	return decodeStrictSlowKeep(body, v, keep)
}

// decodeStrictSlow is decodeStrict with a streaming decoder, whose errors
// say what went wrong where.
func decodeStrictSlow(body []byte, v any) error {
	return decodeStrictSlowKeep(body, v, nil)
}

// decodeStrictSlowKeep is decodeStrictSlow that keeps canonical forms
// as decodeStrictKeep does.
func decodeStrictSlowKeep(body []byte, v any, keep *canonicalMembers) error {
	if err := checkMembers(body, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return newError(store.CodeInvalidRequest, "malformed JSON: data after the object")
	}
	// The body is one valid JSON value by now (a null has no members).
	ms, _ := objectMembers(body)
	return checkStrictKeep(ms, keep)
}

// checkStrict refuses the first member whose value is not I-JSON by
// strictjson.Check, the one rule of strict JSON that /mcp holds its
// bodies to as well: a repeated member name at any depth (however its
// escapes spell it), invalid UTF-8, a number beyond a double, nesting
// deeper than jcs.MaxDepth. Every body is held to it, a call with or
// without a request_id alike. The error is INVALID_REQUEST naming the
// member.
func checkStrict(ms []member) error {
	return checkStrictKeep(ms, nil)
}

// canonicalMembers holds the RFC 8785 canonical forms of a call body's
// arguments and metadata, which checking them makes (strictjson.Canonical):
// the fingerprint takes them as they are (engine.Request's
// CanonicalArguments). A member that is absent stays nil.
type canonicalMembers struct {
	arguments, metadata []byte
}

// checkStrictKeep is checkStrict that keeps, in keep when it is not nil,
// the canonical forms of the members named arguments and metadata. The
// members' names are unique (checkNames, fastCallBody, checkMembers).
func checkStrictKeep(ms []member, keep *canonicalMembers) error {
	for _, m := range ms {
		var slot *[]byte
		if keep != nil {
			switch string(m.name) {
			case "arguments":
				slot = &keep.arguments
			case "metadata":
				slot = &keep.metadata
			}
		}
		if slot == nil {
			if err := strictjson.Check(m.value); err != nil {
				return notIJSON(string(m.name), err)
			}
			continue
		}
		canonical, err := strictjson.Canonical(m.value)
		if err != nil {
			return notIJSON(string(m.name), err)
		}
		*slot = canonical
	}
	return nil
}

// notIJSON is the INVALID_REQUEST of a member that is not I-JSON, in
// jcs's words (what, and at which byte of the member's value).
func notIJSON(field string, err error) error {
	return invalidField(field, fmt.Sprintf("field %q is not strict JSON (I-JSON, RFC 7493): %s of its value", field, strictjson.Reason(err)))
}

// decodeError turns an encoding/json error into INVALID_REQUEST, naming the
// field at fault where there is one.
func decodeError(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syn):
		return &Error{Code: store.CodeInvalidRequest, Message: fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, syn)}
	case errors.As(err, &typ) && typ.Field != "":
		return invalidField(typ.Field, fmt.Sprintf("field %q must be %s, not %s", typ.Field, kindOf(typ.Type.Kind().String()), typ.Value))
	case errors.As(err, &typ):
		return newError(store.CodeInvalidRequest, fmt.Sprintf("the body must be a JSON object, not %s", typ.Value))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return newError(store.CodeInvalidRequest, "malformed JSON: unexpected end of the body")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return invalidField(name, fmt.Sprintf("unknown field %q", name))
	}
	return &Error{Code: store.CodeInvalidRequest, Message: "invalid body", Err: err}
}

func kindOf(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "ptr", "struct", "map":
		return "an object"
	case "int", "int64", "uint64":
		return "an integer"
	}
	return "of another type"
}

// checkMembers refuses the first member of body's top-level object that
// is repeated or whose name is not exactly one of v's JSON names:
// encoding/json matches names regardless of case, so {"Tool":…}, or a
// second "TOOL" after "tool", would otherwise pass as "tool". Malformed
// input is left for the decoder to report.
func checkMembers(body []byte, v any) error {
	known := jsonNames(v)
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := tok.(string)
		if seen[name] {
			return invalidField(name, fmt.Sprintf("field %q appears more than once", name))
		}
		if known != nil && !known[name] {
			return invalidField(name, fmt.Sprintf("unknown field %q", name))
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// jsonNames returns the member names of the struct v points to, or nil
// when v is not a pointer to a struct.
func jsonNames(v any) map[string]bool {
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	// Every request decodes into one of a few types: reflect on each once.
	if names, ok := namesByType.Load(t); ok {
		return names.(map[string]bool)
	}
	names := structNames(t.Elem())
	namesByType.Store(t, names)
	return names
}

// namesByType caches jsonNames by pointer type. The maps are never
// written after they are stored.
var namesByType sync.Map

func structNames(t reflect.Type) map[string]bool {
	names := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[name] = true
	}
	return names
}

// callBody is the JSON body of POST /v1/tools/call.
type callBody struct {
	Tool      *string         `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	RequestID *string         `json:"request_id"`
	SessionID *string         `json:"session_id"`
	Metadata  json.RawMessage `json:"metadata"`
	TimeoutMS json.RawMessage `json:"timeout_ms"`
}

// decodeCall decodes a call body and checks its shape: the members and
// their JSON types; engine.RequestOf then applies the rules both
// transports share (a tool, no empty request_id, metadata an object,
// timeout_ms a positive integer), and the runtime the rest
// (engine.Runtime.Call). idemKey is the
// Idempotency-Key header ("" when absent): the request_id, which must then
// equal the body's when both are given.
func decodeCall(body []byte, idemKey string) (engine.Request, error) {
	b, ok := callBody{}, false
	var canonical canonicalMembers
	if len(body) > 0 {
		// The fast path: as strict as decodeStrict (FuzzFastCallBody),
		// about twice as fast on the bodies of BenchmarkDecodeCall.
		if ms, isObject := objectMembers(body); isObject {
			if b, ok = fastCallBody(ms); ok {
				if err := checkStrictKeep(ms, &canonical); err != nil {
					return engine.Request{}, err
				}
			}
		}
	}
	if !ok {
		if err := decodeStrictKeep(body, &b, &canonical); err != nil {
			return engine.Request{}, err
		}
	}
	w := engine.RawCall{Arguments: b.Arguments, RequestID: b.RequestID, SessionID: b.SessionID, Metadata: &b.Metadata, TimeoutMS: &b.TimeoutMS}
	if b.Tool != nil {
		w.Tool = *b.Tool
	}
	req, err := engine.RequestOf(w)
	if err != nil {
		return req, requestRefusal(err)
	}
	// The canonical forms checkStrict made, for the fingerprint: {} for
	// arguments absent or null, empty (standing for {}) for metadata.
	// Were one missing, the runtime would canonicalise both itself.
	if (req.Arguments == nil || canonical.arguments != nil) && (req.Metadata == nil || canonical.metadata != nil) {
		req.CanonicalArguments = canonicalEmptyObject
		if req.Arguments != nil {
			req.CanonicalArguments = canonical.arguments
		}
		if req.Metadata != nil {
			req.CanonicalMetadata = canonical.metadata
		}
	}
	if idemKey != "" {
		if req.RequestID != "" && req.RequestID != idemKey {
			return req, invalidField("request_id", "the Idempotency-Key header and request_id differ")
		}
		req.RequestID = idemKey
	}
	return req, nil
}

// requestRefusal is engine.RequestOf's refusal as this API's INVALID_REQUEST
// naming the field, with the message alone.
func requestRefusal(err error) error {
	var fe *store.FieldError
	if errors.As(err, &fe) {
		return invalidField(fe.Field, fe.Err.Error())
	}
	return &Error{Code: store.CodeInvalidRequest, Message: err.Error(), Err: err}
}

// canonicalEmptyObject is the canonical form of absent arguments. It is
// never written to.
var canonicalEmptyObject = json.RawMessage(`{}`)

// resolveBody is the JSON body of POST /v1/executions/{id}/resolve.
type resolveBody struct {
	Status *string         `json:"status"`
	Data   json.RawMessage `json:"data"`
	Error  json.RawMessage `json:"error"`
}

func decodeResolve(body []byte) (engine.Resolution, error) {
	var b resolveBody
	if err := decodeStrict(body, &b); err != nil {
		return engine.Resolution{}, err
	}
	if b.Status == nil {
		return engine.Resolution{}, invalidField("status", `"status" is required: "completed", "failed" or "released"`)
	}
	return engine.Resolution{Status: *b.Status, Data: b.Data, Error: engine.NullIsAbsent(b.Error)}, nil
}
