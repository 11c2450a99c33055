package jcs

import (
	"unicode/utf16"
	"unicode/utf8"
)

// stringValue parses the string starting at p.pos and appends its
// canonical form to p.out.
func (p *parser) stringValue() error {
	var err error
	if p.scratch, err = p.decodeString(p.scratch[:0]); err != nil {
		return err
	}
	p.out = appendQuoted(p.out, p.scratch)
	return nil
}

// decodeString parses the string starting at p.pos (which holds the
// opening quote), appends its decoded UTF-8 text to dst and leaves p.pos
// after the closing quote. The appended text is guaranteed valid UTF-8.
func (p *parser) decodeString(dst []byte) ([]byte, error) {
	start := p.pos
	p.pos++ // opening '"'
	for {
		// Copy a run of bytes that need no attention in one go.
		run := p.pos
		for p.pos < len(p.data) {
			c := p.data[p.pos]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			p.pos++
		}
		dst = append(dst, p.data[run:p.pos]...)
		if p.pos >= len(p.data) {
			return dst, errorAt(ErrSyntax, start, "unterminated string")
		}

		switch c := p.data[p.pos]; {
		case c == '"':
			p.pos++
			return dst, nil
		case c == '\\':
			var err error
			if dst, err = p.escape(dst); err != nil {
				return dst, err
			}
		case c < 0x20:
			return dst, errorAt(ErrSyntax, p.pos, "unescaped control character in string")
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size == 1 {
				return dst, errorAt(ErrInvalidUTF8, p.pos, "invalid UTF-8 byte in string")
			}
			dst = append(dst, p.data[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
}

// escape decodes the escape sequence at p.pos (which holds the
// backslash) and appends the character it denotes to dst. A surrogate
// pair written as two \u escapes is decoded as one character; a lone
// surrogate is an error.
func (p *parser) escape(dst []byte) ([]byte, error) {
	off := p.pos
	if p.pos+1 >= len(p.data) {
		return dst, errorAt(ErrSyntax, off, "unterminated escape sequence")
	}
	c := p.data[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return append(dst, c), nil
	case 'b':
		return append(dst, '\b'), nil
	case 'f':
		return append(dst, '\f'), nil
	case 'n':
		return append(dst, '\n'), nil
	case 'r':
		return append(dst, '\r'), nil
	case 't':
		return append(dst, '\t'), nil
	case 'u':
	default:
		return dst, errorAt(ErrSyntax, off, "invalid escape sequence")
	}

	r, ok := p.hex4()
	if !ok {
		return dst, errorAt(ErrSyntax, off, "invalid \\u escape")
	}
	if utf16.IsSurrogate(r) {
		if r >= 0xDC00 {
			return dst, errorAt(ErrInvalidUTF8, off, "lone low surrogate escape")
		}
		if p.pos+1 >= len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
			return dst, errorAt(ErrInvalidUTF8, off, "lone high surrogate escape")
		}
		off2 := p.pos
		p.pos += 2
		r2, ok := p.hex4()
		if !ok {
			return dst, errorAt(ErrSyntax, off2, "invalid \\u escape")
		}
		if r2 < 0xDC00 || r2 > 0xDFFF {
			return dst, errorAt(ErrInvalidUTF8, off, "lone high surrogate escape")
		}
		r = utf16.DecodeRune(r, r2)
	}
	return utf8.AppendRune(dst, r), nil
}

// hex4 decodes four hexadecimal digits at p.pos and advances past them.
func (p *parser) hex4() (rune, bool) {
	if len(p.data)-p.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
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
	p.pos += 4
	return r, true
}

// appendQuoted appends s, which must be valid UTF-8, to dst as a
// canonical JSON string (RFC 8785 section 3.2.2.2): only '"', '\' and
// the control characters U+0000 to U+001F are escaped, using the short
// forms \b \t \n \f \r where they exist and lowercase \u00xx otherwise.
func appendQuoted(dst, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
