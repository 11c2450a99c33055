package jcs

import (
	"cmp"
	"unicode/utf8"
)

// compareUTF16 compares two valid UTF-8 strings as arrays of UTF-16 code
// units, the member-name order RFC 8785 section 3.2.3 prescribes. It
// returns -1, 0 or +1.
//
// UTF-8 byte order equals code point order, which agrees with UTF-16
// code-unit order except that supplementary characters (encoded as
// surrogates 0xD800-0xDFFF) sort before U+E000-U+FFFF in UTF-16. So the
// strings are compared byte-wise up to the first differing code point,
// and only that pair of code points is compared as UTF-16.
func compareUTF16(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	// a[:i] == b[:i] and both are valid UTF-8, so this backs up to the
	// start of the first differing code point in both strings.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	if c := cmp.Compare(firstUnit(ra), firstUnit(rb)); c != 0 {
		return c
	}
	// Equal first units: both are supplementary characters with the same
	// high surrogate, so code point order equals low-surrogate order.
	return cmp.Compare(ra, rb)
}

// firstUnit returns the first UTF-16 code unit encoding r: r itself in
// the Basic Multilingual Plane, otherwise its high surrogate.
func firstUnit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	return 0xD800 + (r-0x10000)>>10
}
