package fastpath

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmyhq/carmy/internal/jsonscan"
)

// The request parser: a tools/call body of the plain JSON doc.go
// describes, read into the parts of the SDK's request.

// methodCallTool is the method the fast path serves.
const methodCallTool = "tools/call"

// Limits of the plain JSON the fast path reads.
const (
	fastMaxDepth  = 64
	fastMaxNumber = 15 // characters: every such integer is exact as a float64
)

// protocolMetaPrefix begins the _meta keys the SDK reads itself.
var protocolMetaPrefix = []byte("io.modelcontextprotocol/")

// fastCall is a tools/call the fast path serves.
type fastCall struct {
	id   jsonrpc.ID
	name string
	args json.RawMessage
	meta sdk.Meta // nil when params has no _meta
	// newProtocol says the call is of 2026-07-28, whose _meta may hold
	// the protocol's keys of meta.go; proto holds their raw values.
	newProtocol bool
	proto       protocolMeta
}

// parseFastCall reads body, valid JSON (Server.Serve's caller checked
// it), as a tools/call of the plain JSON the fast path serves (doc.go),
// or returns false. newProtocol says the request is of 2026-07-28. A
// _meta key among keys is kept as that string, without an allocation.
func parseFastCall(body []byte, newProtocol bool, keys []string) (fastCall, bool) {
	c := fastCall{newProtocol: newProtocol}
	if !plainJSON(body) {
		return c, false
	}
	var have [4]bool // jsonrpc, id, method, params
	var params json.RawMessage
	ok := members(body, func(key []byte, v json.RawMessage) bool {
		switch string(key) {
		case "jsonrpc":
			have[0] = string(v) == `"2.0"`
			return have[0]
		case "id":
			id, ok := idOf(v)
			c.id, have[1] = id, ok
			return ok
		case "method":
			have[2] = string(v) == `"`+methodCallTool+`"`
			return have[2]
		case "params":
			params, have[3] = v, len(v) > 0 && v[0] == '{'
			return have[3]
		}
		return false
	})
	if !ok || have != [4]bool{true, true, true, true} {
		return c, false
	}
	var named bool
	ok = members(params, func(key []byte, v json.RawMessage) bool {
		switch string(key) {
		case "name":
			c.name, named = stringOf(v)
			return named
		case "arguments":
			c.args = v
			return true
		case "_meta":
			if len(v) == 0 || v[0] != '{' {
				return false
			}
			c.meta = make(sdk.Meta, 4)
			return members(v, func(key []byte, v json.RawMessage) bool {
				if bytes.HasPrefix(key, protocolMetaPrefix) {
					// Left out of the request: Carmy reads only its own
					// keys; meta.go checks them.
					return newProtocol && c.proto.note(key, v)
				}
				val, ok := valueOf(v)
				if ok {
					c.meta[metaKey(key, keys)] = val
				}
				return ok
			})
		}
		return false
	})
	return c, ok && named
}

// metaKey is key as a string: the one of keys it equals, without an
// allocation, else a copy.
func metaKey(key []byte, keys []string) string {
	for _, k := range keys {
		if string(key) == k {
			return k
		}
	}
	return string(key)
}

// stringOf decodes v, valid plain JSON, as encoding/json decodes it into
// a string, or returns false when it is no string; one without escapes
// directly.
func stringOf(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	return s, json.Unmarshal(v, &s) == nil
}

// valueOf decodes v, valid plain JSON, as encoding/json decodes it into
// an any; a string without escapes directly.
func valueOf(v json.RawMessage) (any, bool) {
	if len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 {
		return string(v[1 : len(v)-1]), true
	}
	var val any
	return val, json.Unmarshal(v, &val) == nil
}

// idOf reads a JSON-RPC id the fast path serves: a string, or an integer
// (which the SDK reads through a float64, exact at this length).
func idOf(v json.RawMessage) (jsonrpc.ID, bool) {
	if s, ok := stringOf(v); ok {
		id, err := jsonrpc.MakeID(s)
		return id, err == nil
	}
	if !jsonscan.IsInteger(v) {
		return jsonrpc.ID{}, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(float64(n))
	return id, err == nil
}

// members calls fn with each member of the JSON object raw, in order, and
// reports whether raw is one object (and nothing after it), with no key
// twice, whose every member fn accepted. raw must be valid JSON (see
// parseFastCall): the one JSON scanner (jsonscan.ObjectMembers) splits
// it. The key fn is given is only valid during the call (it may point
// into raw); a key with an escape is decoded first.
func members(raw []byte, fn func(key []byte, v json.RawMessage) bool) bool {
	var buf [16]jsonscan.Member
	ms, ok := jsonscan.ObjectMembers(buf[:0], raw)
	if !ok {
		return false
	}
	var seenBuf [16][]byte
	seen := seenBuf[:0]
	for _, m := range ms {
		key := m.Name[1 : len(m.Name)-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			decoded, _, err := jsonscan.AppendUnquoted(nil, m.Name, 0)
			if err != nil {
				return false
			}
			key = decoded
		}
		for _, k := range seen {
			if bytes.Equal(k, key) {
				return false
			}
		}
		seen = append(seen, key)
		if !fn(key, m.Value) {
			return false
		}
	}
	return true
}

// plainJSON reports whether body keeps to the plain JSON on which decoders
// agree: valid UTF-8, no escaped surrogate, no number with an exponent or
// longer than fastMaxNumber, nesting at most fastMaxDepth. It does not
// check the syntax (members does).
func plainJSON(body []byte) bool {
	if !utf8.Valid(body) {
		return false
	}
	depth, number := 0, 0
	for i := 0; i < len(body); i++ {
		b := body[i]
		if b == '"' {
			number = 0
			for i++; i < len(body) && body[i] != '"'; i++ {
				if body[i] != '\\' {
					continue
				}
				i++
				if i < len(body) && body[i] == 'u' && i+2 < len(body) &&
					(body[i+1] == 'd' || body[i+1] == 'D') && strings.IndexByte("89abcdefABCDEF", body[i+2]) >= 0 {
					return false
				}
			}
			continue
		}
		switch {
		case b == '{' || b == '[':
			if depth++; depth > fastMaxDepth {
				return false
			}
		case b == '}' || b == ']':
			depth--
		case b == 'e' || b == 'E':
			if number > 0 {
				return false
			}
		case b == '-' || b == '+' || b == '.' || (b >= '0' && b <= '9'):
			if number++; number > fastMaxNumber {
				return false
			}
			continue
		}
		number = 0
	}
	return true
}
