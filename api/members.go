package api

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// objectNames returns the member names of the top-level object of body,
// which must be valid JSON (json.Valid), in order. ok is false when body is
// not an object. Plain ASCII names are not copied; any other is unquoted by
// encoding/json (escapes decoded, invalid UTF-8 replaced), as a decoder
// would see it.
func objectNames(body []byte) (names [][]byte, ok bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return nil, false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		return nil, true
	}
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
		names = append(names, name)
		i = skipSpace(body, end)
		i = skipSpace(body, i+1) // the ':'
		i = skipSpace(body, valueEnd(body, i))
		if i >= len(body) || body[i] == '}' {
			return names, true
		}
		i = skipSpace(body, i+1) // the ','
	}
	return names, true
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
func checkNames(names [][]byte, known map[string]bool) error {
	for i, n := range names {
		for _, prev := range names[:i] {
			if bytes.Equal(prev, n) {
				return invalidField(string(n), fmt.Sprintf("field %q appears more than once", n))
			}
		}
		if known != nil && !known[string(n)] {
			return invalidField(string(n), fmt.Sprintf("unknown field %q", n))
		}
	}
	return nil
}
