package jsonscan

import (
	"unicode/utf16"
	"unicode/utf8"
)

// StringFlags say what a string scanned by [ScanString] holds between its
// quotes. Zero is printable ASCII without escapes: the string reads the
// same quoted and unquoted.
type StringFlags uint8

const (
	// Escaped: the string holds a backslash escape.
	Escaped StringFlags = 1 << iota
	// NonASCII: the string holds a byte of 0x80 or more.
	NonASCII
	// BadUTF8: the string holds a byte that is not part of valid UTF-8
	// (escapes are not decoded: an escaped lone surrogate does not set
	// it).
	BadUTF8
)

// ScanString scans the string whose opening quote is data[i] and returns
// the index after its closing quote, with what it holds. Its syntax is
// RFC 8259's, as encoding/json's Valid reads it: no unescaped control
// character, escapes of the nine kinds (\u with four hex digits, any
// code unit); raw bytes of 0x80 and more are accepted whatever they are
// (BadUTF8 says when they are not UTF-8).
func ScanString(data []byte, i int) (end int, flags StringFlags, err error) {
	start := i
	i++ // the opening '"'
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			return i + 1, flags, nil
		case c == '\\':
			flags |= Escaped
			if i+1 >= len(data) {
				return i, flags, errorAt(Syntax, i, "unterminated escape sequence")
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(data, i+2); !ok {
					return i, flags, errorAt(Syntax, i, "invalid \\u escape")
				}
				i += 6
			default:
				return i, flags, errorAt(Syntax, i, "invalid escape sequence")
			}
		case c < 0x20:
			return i, flags, errorAt(Syntax, i, "unescaped control character in string")
		case c < utf8.RuneSelf:
			i++
		default:
			flags |= NonASCII
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				flags |= BadUTF8
			}
			i += size
		}
	}
	return i, flags, errorAt(Syntax, start, "unterminated string")
}

// AppendUnquoted decodes the string whose opening quote is data[i],
// appends its text to dst and returns the index after its closing quote.
// The string must be I-JSON besides RFC 8259 syntax: its raw bytes valid
// UTF-8 and no escaped lone surrogate (an error of Kind InvalidUTF8); a
// surrogate pair written as two \u escapes is one character. The text
// appended is valid UTF-8. On an error dst may have been appended to.
func AppendUnquoted(dst, data []byte, i int) ([]byte, int, error) {
	start := i
	i++ // the opening '"'
	for {
		// Copy a run of bytes that need no attention in one go.
		run := i
		for i < len(data) {
			c := data[i]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			i++
		}
		dst = append(dst, data[run:i]...)
		if i >= len(data) {
			return dst, i, errorAt(Syntax, start, "unterminated string")
		}
		switch c := data[i]; {
		case c == '"':
			return dst, i + 1, nil
		case c == '\\':
			var err error
			if dst, i, err = appendEscape(dst, data, i); err != nil {
				return dst, i, err
			}
		case c < 0x20:
			return dst, i, errorAt(Syntax, i, "unescaped control character in string")
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return dst, i, errorAt(InvalidUTF8, i, "invalid UTF-8 byte in string")
			}
			dst = append(dst, data[i:i+size]...)
			i += size
		}
	}
}

// appendEscape decodes the escape whose backslash is data[i], appends the
// character it denotes to dst and returns the index after it.
func appendEscape(dst, data []byte, i int) ([]byte, int, error) {
	off := i
	if i+1 >= len(data) {
		return dst, i, errorAt(Syntax, off, "unterminated escape sequence")
	}
	c := data[i+1]
	i += 2
	switch c {
	case '"', '\\', '/':
		return append(dst, c), i, nil
	case 'b':
		return append(dst, '\b'), i, nil
	case 'f':
		return append(dst, '\f'), i, nil
	case 'n':
		return append(dst, '\n'), i, nil
	case 'r':
		return append(dst, '\r'), i, nil
	case 't':
		return append(dst, '\t'), i, nil
	case 'u':
	default:
		return dst, i, errorAt(Syntax, off, "invalid escape sequence")
	}
	r, ok := hex4(data, i)
	if !ok {
		return dst, i, errorAt(Syntax, off, "invalid \\u escape")
	}
	i += 4
	if utf16.IsSurrogate(r) {
		if r >= 0xDC00 {
			return dst, i, errorAt(InvalidUTF8, off, "lone low surrogate escape")
		}
		if i+1 >= len(data) || data[i] != '\\' || data[i+1] != 'u' {
			return dst, i, errorAt(InvalidUTF8, off, "lone high surrogate escape")
		}
		off2 := i
		r2, ok := hex4(data, i+2)
		if !ok {
			return dst, i + 2, errorAt(Syntax, off2, "invalid \\u escape")
		}
		i += 6
		if r2 < 0xDC00 || r2 > 0xDFFF {
			return dst, i, errorAt(InvalidUTF8, off, "lone high surrogate escape")
		}
		r = utf16.DecodeRune(r, r2)
	}
	return utf8.AppendRune(dst, r), i, nil
}

// hex4 decodes the four hexadecimal digits at data[i:].
func hex4(data []byte, i int) (rune, bool) {
	if i < 0 || len(data)-i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range data[i : i+4] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}
