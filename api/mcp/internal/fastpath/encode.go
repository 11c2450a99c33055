package fastpath

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/internal/jsonscan"
)

// The fast path's encoding of a tools/call answer (doc.go).
//
// The SDK encodes a result twice: CallToolResult.MarshalJSON with
// json.Marshal (HTML-escaping every string, its TextContent's by
// TextContent.MarshalJSON, and compacting every raw JSON value with
// HTML escapes), then the JSON-RPC envelope around it with an Encoder
// that escapes no HTML (which leaves the result's bytes as they are, a
// compact JSON text). appendAnswer writes the same bytes in one pass,
// without reflection, for the results Carmy's tools make: a _meta of
// strings, booleans and raw JSON, text content only, a structuredContent
// of raw JSON, isError. For any other result it reports false, and the
// caller encodes it as the SDK does (jsonscan.MarshalNoHTML, then
// jsonrpc.EncodeMessage). TestAppendAnswerMatchesSDK and
// FuzzAppendAnswer compare the two encodings; TestFastPathMatchesSDK* in
// package api/mcp compare whole answers.

// appendAnswer appends the JSON-RPC answer of a tools/call of id whose
// result is res: {"jsonrpc":"2.0","id":…,"result":…}. serverInfo, when
// not nil, is added to the result's _meta under metaServerInfo unless it
// has that key; complete adds "resultType":"complete" as its last
// member. It reports false, with dst unchanged, for a result or an id it
// does not encode as the SDK does.
func appendAnswer(dst []byte, id jsonrpc.ID, res *sdk.CallToolResult, serverInfo json.RawMessage, complete bool) ([]byte, bool) {
	out := append(dst, `{"jsonrpc":"2.0","id":`...)
	out, ok := appendID(out, id)
	if !ok {
		return dst, false
	}
	out = append(out, `,"result":`...)
	if out, ok = appendResult(out, res, serverInfo, complete); !ok {
		return dst, false
	}
	return append(out, '}'), true
}

// appendID appends a JSON-RPC id as the SDK's envelope encodes it (no
// HTML escaping): an integer, or a string.
func appendID(dst []byte, id jsonrpc.ID) ([]byte, bool) {
	switch v := id.Raw().(type) {
	case int64:
		return strconv.AppendInt(dst, v, 10), true
	case string:
		return jsonscan.AppendString(dst, v, jsonscan.NoHTML), true
	}
	return dst, false
}

// appendResult appends res as CallToolResult.MarshalJSON encodes it, in
// the member order of its struct: _meta, content, structuredContent,
// isError, then resultType.
func appendResult(dst []byte, res *sdk.CallToolResult, serverInfo json.RawMessage, complete bool) ([]byte, bool) {
	if res == nil || res.InputRequests != nil || res.RequestState != "" {
		return dst, false
	}
	out := append(dst, '{')
	var ok bool
	if out, ok = appendMeta(out, res.Meta, serverInfo); !ok {
		return dst, false
	}
	out = append(out, `"content":`...)
	if out, ok = appendContent(out, res.Content); !ok {
		return dst, false
	}
	switch v := res.StructuredContent.(type) {
	case nil:
	case json.RawMessage:
		if len(v) == 0 {
			return dst, false
		}
		out = append(out, `,"structuredContent":`...)
		if out, ok = appendRawJSON(out, v); !ok {
			return dst, false
		}
	default:
		return dst, false
	}
	if res.IsError {
		out = append(out, `,"isError":true`...)
	}
	if complete {
		out = append(out, `,"resultType":"complete"`...)
	}
	return append(out, '}'), true
}

// maxMetaKeys bounds the _meta appendMeta encodes; a larger one is left
// to the SDK's encoder.
const maxMetaKeys = 8

// appendMeta appends `"_meta":{…},` for a _meta with members (and
// serverInfo), its keys sorted as encoding/json sorts a map's, or
// nothing for an empty one.
func appendMeta(dst []byte, meta sdk.Meta, serverInfo json.RawMessage) ([]byte, bool) {
	var keysBuf [maxMetaKeys + 1]string
	keys := keysBuf[:0]
	if len(meta) > maxMetaKeys {
		return dst, false
	}
	for k := range meta {
		keys = append(keys, k)
	}
	_, hasInfo := meta[metaServerInfo]
	addInfo := serverInfo != nil && !hasInfo
	if addInfo {
		keys = append(keys, metaServerInfo)
	}
	if len(keys) == 0 {
		return dst, true
	}
	slices.Sort(keys)
	out := append(dst, `"_meta":{`...)
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = jsonscan.AppendString(out, k, jsonscan.HTMLSafe)
		out = append(out, ':')
		var v any = serverInfo
		if !addInfo || k != metaServerInfo {
			v = meta[k]
		}
		var ok bool
		if out, ok = appendMetaValue(out, v); !ok {
			return dst, false
		}
	}
	return append(out, `},`...), true
}

// appendMetaValue appends a value of _meta of a type appendMeta encodes.
func appendMetaValue(dst []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case string:
		return jsonscan.AppendString(dst, v, jsonscan.HTMLSafe), true
	case bool:
		if v {
			return append(dst, "true"...), true
		}
		return append(dst, "false"...), true
	case json.RawMessage:
		if len(v) == 0 {
			return dst, false
		}
		return appendRawJSON(dst, v)
	}
	return dst, false
}

// appendContent appends content, text items without _meta or
// annotations, as TextContent.MarshalJSON encodes each.
func appendContent(dst []byte, content []sdk.Content) ([]byte, bool) {
	if content == nil {
		return append(dst, "null"...), true
	}
	out := append(dst, '[')
	for i, c := range content {
		tc, ok := c.(*sdk.TextContent)
		if !ok || tc == nil || len(tc.Meta) > 0 || tc.Annotations != nil {
			return dst, false
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"type":"text","text":`...)
		out = jsonscan.AppendString(out, tc.Text, jsonscan.HTMLSafe)
		out = append(out, '}')
	}
	return append(out, ']'), true
}

// appendRawJSON appends raw as json.Marshal does a json.RawMessage:
// compacted, with <, >, &, U+2028 and U+2029 escaped. It reports false
// for raw that is not valid JSON (json.Marshal fails on it).
func appendRawJSON(dst, raw []byte) ([]byte, bool) {
	if !jsonscan.Valid(raw) {
		return dst, false
	}
	if plainCompact(raw) {
		return append(dst, raw...), true
	}
	var compact, escaped bytes.Buffer
	if json.Compact(&compact, raw) != nil {
		return dst, false
	}
	json.HTMLEscape(&escaped, compact.Bytes())
	return append(dst, escaped.Bytes()...), true
}

// plainCompact reports whether raw, valid JSON, is compact already and
// holds no byte that json.Marshal would escape (<, >, & or the first byte
// of U+2028 and U+2029, and of every other rune it begins): it is then
// encoded as it is.
func plainCompact(raw []byte) bool {
	inString := false
	for i := 0; i < len(raw); i++ {
		switch b := raw[i]; {
		case b == '<' || b == '>' || b == '&' || b == 0xE2:
			return false
		case inString:
			switch b {
			case '\\':
				i++
			case '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == ' ' || b == '\t' || b == '\n' || b == '\r':
			return false
		}
	}
	return true
}

// answerBufs recycles the buffers of fast answers.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledAnswer bounds the buffers answerBufs keeps.
const maxPooledAnswer = 64 << 10
