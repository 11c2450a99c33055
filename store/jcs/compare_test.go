package jcs

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unicode/utf16"
)

// TestCompareUTF16 checks compareUTF16 against a direct comparison of
// UTF-16 encodings on random strings biased towards the characters
// where UTF-8 and UTF-16 orders differ.
func TestCompareUTF16(t *testing.T) {
	pool := []rune{'a', 'b', 0x7f, 0x80, 0xff, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfb33, 0xffff,
		0x10000, 0x1f600, 0x1f601, 0x10ffff}
	r := rand.New(rand.NewPCG(7, 8))
	randString := func() []rune {
		s := make([]rune, r.IntN(4))
		for i := range s {
			s[i] = pool[r.IntN(len(pool))]
		}
		return s
	}
	for range 100_000 {
		a, b := randString(), randString()
		want := slices.Compare(utf16.Encode(a), utf16.Encode(b))
		got := compareUTF16([]byte(string(a)), []byte(string(b)))
		if got != want {
			t.Fatalf("compareUTF16(%q, %q) = %d, want %d", string(a), string(b), got, want)
		}
	}
}
