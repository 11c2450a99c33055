package api

// This file splits a JSON object into its members (names and raw values)
// without decoding them, with the one JSON scanner (internal/jsonscan):
// the fast path of strict decoding (decode.go).
// It has nothing to do with cluster members (cluster.go).

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/carmyhq/carmy/internal/jsonscan"
)

// member is one member of a JSON object: its name (unquoted) and its
// value's bytes, without surrounding space.
type member struct {
	name, value []byte
}

// objectMembers returns the members of the top-level object of body, in
// order, when body is one valid JSON object (jsonscan.ObjectMembers, which
// checks its syntax as encoding/json's Valid does); ok is false for
// anything else. Plain ASCII names are not copied; any other is unquoted
// by encoding/json (escapes decoded, invalid UTF-8 replaced), as a
// decoder would see it. Values alias body.
func objectMembers(body []byte) (members []member, ok bool) {
	var scanned [8]jsonscan.Member
	ms, ok := jsonscan.ObjectMembers(scanned[:0], body)
	if !ok {
		return nil, false
	}
	if len(ms) == 0 {
		return nil, true
	}
	members = make([]member, len(ms))
	for i, m := range ms {
		name := m.Name[1 : len(m.Name)-1]
		if !plainASCII(name) {
			var s string
			if json.Unmarshal(m.Name, &s) != nil {
				return nil, false
			}
			name = []byte(s)
		}
		members[i] = member{name: name, value: m.Value}
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
	// The string members' values, one allocation for the three (b points
	// into it) rather than one each.
	var strs *[3]string
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
			if strs == nil {
				strs = new([3]string)
			}
			strs[slot] = string(v[1 : len(v)-1])
			*str = &strs[slot]
		default:
			return b, false
		}
	}
	return b, true
}
