package jsonscan

import "unicode/utf8"

// Escaping is a set of rules for writing a JSON string.
type Escaping uint8

const (
	// Canonical is RFC 8785's (section 3.2.2.2): only '"', '\' and the
	// control characters U+0000 to U+001F are escaped, with \b \t \n \f
	// \r where they exist and lowercase \u00xx otherwise. The text must
	// be valid UTF-8; every other byte is copied as it is.
	Canonical Escaping = iota
	// HTMLSafe is encoding/json's default (Marshal): Canonical's escapes,
	// and besides them '<', '>' and '&' as \u003c, \u003e and \u0026,
	// U+2028 and U+2029 as \u2028 and \u2029, and each byte that is not
	// part of valid UTF-8 as \ufffd.
	HTMLSafe
	// NoHTML is encoding/json's without HTML escaping (an Encoder with
	// SetEscapeHTML(false), as [MarshalNoHTML]): HTMLSafe's escapes but
	// those of '<', '>' and '&', which are copied as they are.
	NoHTML
)

const hexDigits = "0123456789abcdef"

// plain[e][c] says that the ASCII byte c is copied as it is under the
// rules e (HTMLSafe or NoHTML).
var plain = func() (t [3][utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[NoHTML][c] = c != '"' && c != '\\'
		t[HTMLSafe][c] = t[NoHTML][c] && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s to dst as a JSON string, quotes included,
// escaped by the rules e.
func AppendString[S ~string | ~[]byte](dst []byte, s S, e Escaping) []byte {
	if e == Canonical {
		return appendCanonical(dst, s)
	}
	safe := &plain[HTMLSafe]
	if e == NoHTML {
		safe = &plain[NoHTML]
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = appendEscaped(dst, c)
			i++
			start = i
			continue
		}
		var buf [utf8.UTFMax]byte
		r, size := utf8.DecodeRune(buf[:copy(buf[:], s[i:])])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendCanonical is AppendString with the rules Canonical, in a loop of
// its own: the canonicaliser writes every string through it.
func appendCanonical[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = appendEscaped(dst, c)
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendEscaped appends the escape of the ASCII byte c.
func appendEscaped(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\t':
		return append(dst, '\\', 't')
	case '\n':
		return append(dst, '\\', 'n')
	case '\f':
		return append(dst, '\\', 'f')
	case '\r':
		return append(dst, '\\', 'r')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
}
