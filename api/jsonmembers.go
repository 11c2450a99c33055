package api

// This file scans the members of a JSON object (names and raw values)
// without decoding them: the fast path of strict decoding (decode.go).
// It has nothing to do with cluster members (cluster.go).

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// member is one member of a JSON object: its name (unquoted) and its
// value's bytes, without surrounding space.
type member struct {
	name, value []byte
}

// objectMembers returns the members of the top-level object of body, which
// must be valid JSON (json.Valid), in order. ok is false when body is not
// an object. Plain ASCII names are not copied; any other is unquoted by
// encoding/json (escapes decoded, invalid UTF-8 replaced), as a decoder
// would see it. Values alias body.
func objectMembers(body []byte) (members []member, ok bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return nil, true
	}
	members = make([]member, 0, 8)
	for i < len(body) {
		// A name: body[i] is '"'.
		end := stringEnd(body, i)
		name := body[i+1 : end-1]
		if !plainASCII(name) {
			var s string
			if json.Unmarshal(body[i:end], &s) != nil {
				return nil, false
			}
			name = []byte(s)
		}
		i = skipSpace(body, end)
		i = skipSpace(body, i+1) // the ':'
		vend := valueEnd(body, i)
		members = append(members, member{name: name, value: body[i:vend]})
		i = skipSpace(body, vend)
		if i >= len(body) || body[i] == '}' {
			return members, true
		}
		i = skipSpace(body, i+1) // the ','
	}
	return members, true
}

// plainASCII reports whether a name reads the same quoted and unquoted:
// printable ASCII without escapes.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return false
		}
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string that starts at b[i] ('"').
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// valueEnd returns the index after the valid JSON value that starts at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	// A number, true, false or null: up to the next delimiter.
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}

// checkNames refuses the first repeated name, or the first name that is
// not exactly one of known (nil known: any name), as checkMembers does.
func checkNames(ms []member, known map[string]bool) error {
	for i, m := range ms {
		n := m.name
		for _, prev := range ms[:i] {
			if bytes.Equal(prev.name, n) {
				return invalidField(string(n), fmt.Sprintf("field %q appears more than once", n))
			}
		}
		if known != nil && !known[string(n)] {
			return invalidField(string(n), fmt.Sprintf("unknown field %q", n))
		}
	}
	return nil
}

// fastCallBody decodes a call body from its members (objectMembers of a
// valid body) without encoding/json when every member is plain: known
// names once each, string members as strings of printable ASCII without
// escapes (or null), any JSON for the others. ok is false for anything
// else, which the strict decoder then handles, words the errors of, or
// decodes. What it returns equals what json.Unmarshal would, except that
// the raw members alias the body. It does not check that the values are
// I-JSON: checkStrict does, as decodeStrict does after it decodes.
func fastCallBody(ms []member) (b callBody, ok bool) {
	var seen [6]bool
	for _, m := range ms {
		var slot int
		var str **string
		var raw *json.RawMessage
		switch string(m.name) {
		case "tool":
			slot, str = 0, &b.Tool
		case "request_id":
			slot, str = 1, &b.RequestID
		case "session_id":
			slot, str = 2, &b.SessionID
		case "arguments":
			slot, raw = 3, &b.Arguments
		case "metadata":
			slot, raw = 4, &b.Metadata
		case "timeout_ms":
			slot, raw = 5, &b.TimeoutMS
		default:
			return b, false
		}
		if seen[slot] {
			return b, false
		}
		seen[slot] = true
		if raw != nil {
			*raw = m.value
			continue
		}
		v := m.value
		switch {
		case string(v) == "null":
			*str = nil
		case len(v) >= 2 && v[0] == '"' && plainASCII(v[1:len(v)-1]):
			s := string(v[1 : len(v)-1])
			*str = &s
		default:
			return b, false
		}
	}
	return b, true
}
