package jcs

import (
	"bytes"

	"github.com/carmyhq/carmy/internal/jsonscan"
)

// isCanonical reports whether data is one JSON value written exactly as
// RFC 8785 writes it, and valid I-JSON within MaxDepth, so that
// AppendCanonical may copy it. It answers false for anything it does not
// recognise at a glance, which the parser then handles: whitespace, an
// escape in a string, a member name that is not ASCII, a number that is
// not an integer of at most 15 digits. A true answer is never wrong
// (FuzzIsCanonical): what it accepts, the parser writes back unchanged.
func isCanonical(data []byte) bool {
	end, ok := canonicalValue(data, 0, 0)
	return ok && end == len(data)
}

// canonicalValue scans the canonical value at data[pos:], at depth
// nesting levels, and returns where it ends.
func canonicalValue(data []byte, pos, depth int) (int, bool) {
	if pos >= len(data) {
		return pos, false
	}
	switch c := data[pos]; {
	case c == '{':
		return canonicalObject(data, pos, depth+1)
	case c == '[':
		return canonicalArray(data, pos, depth+1)
	case c == '"':
		return canonicalString(data, pos, false)
	case c == '-' || jsonscan.IsDigit(c):
		return canonicalInteger(data, pos)
	case c == 't':
		return canonicalLiteral(data, pos, "true")
	case c == 'f':
		return canonicalLiteral(data, pos, "false")
	case c == 'n':
		return canonicalLiteral(data, pos, "null")
	}
	return pos, false
}

func canonicalLiteral(data []byte, pos int, lit string) (int, bool) {
	end := pos + len(lit)
	return end, end <= len(data) && string(data[pos:end]) == lit
}

// canonicalObject scans an object whose member names are ASCII strings
// without escapes, in strictly increasing order (for ASCII, UTF-16 order
// is byte order, and a strict order has no repeated name).
func canonicalObject(data []byte, pos, depth int) (int, bool) {
	if depth > MaxDepth {
		return pos, false
	}
	pos++ // '{'
	if pos < len(data) && data[pos] == '}' {
		return pos + 1, true
	}
	var prev []byte
	for first := true; ; first = false {
		if pos >= len(data) || data[pos] != '"' {
			return pos, false
		}
		start := pos
		end, ok := canonicalString(data, pos, true)
		if !ok {
			return pos, false
		}
		name := data[start+1 : end-1]
		if !first && bytes.Compare(prev, name) >= 0 {
			return pos, false
		}
		prev = name
		if end >= len(data) || data[end] != ':' {
			return pos, false
		}
		if pos, ok = canonicalValue(data, end+1, depth); !ok || pos >= len(data) {
			return pos, false
		}
		switch data[pos] {
		case ',':
			pos++
		case '}':
			return pos + 1, true
		default:
			return pos, false
		}
	}
}

func canonicalArray(data []byte, pos, depth int) (int, bool) {
	if depth > MaxDepth {
		return pos, false
	}
	pos++ // '['
	if pos < len(data) && data[pos] == ']' {
		return pos + 1, true
	}
	for {
		var ok bool
		if pos, ok = canonicalValue(data, pos, depth); !ok || pos >= len(data) {
			return pos, false
		}
		switch data[pos] {
		case ',':
			pos++
		case ']':
			return pos + 1, true
		default:
			return pos, false
		}
	}
}

// canonicalString scans a string without escapes (a canonical string
// escapes only '"', '\' and control characters, which this leaves to the
// parser) whose other bytes are valid UTF-8, ASCII only when asciiOnly.
func canonicalString(data []byte, pos int, asciiOnly bool) (int, bool) {
	end, flags, err := jsonscan.ScanString(data, pos)
	refused := jsonscan.Escaped | jsonscan.BadUTF8
	if asciiOnly {
		refused |= jsonscan.NonASCII
	}
	return end, err == nil && flags&refused == 0
}

// canonicalInteger scans an integer as RFC 8785 writes it: 0, or up to 15
// digits without a leading zero, negative or not (every such integer is
// a double exactly, written in full). A fraction or an exponent is left
// to the parser, and so is -0.
func canonicalInteger(data []byte, pos int) (int, bool) {
	n, err := jsonscan.ScanNumber(data, pos)
	if err != nil || !n.Integer || n.IntDigits > 15 {
		return n.End, false
	}
	if n.Negative && n.IntDigits == 1 && data[pos+1] == '0' { // -0
		return n.End, false
	}
	return n.End, true
}
