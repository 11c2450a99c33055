package jcs

import (
	"bytes"
	"strings"
	"testing"
)

// canonicalSeeds are inputs on both sides of what isCanonical accepts.
var canonicalSeeds = []string{
	`{"payload":"0123456789abcdef"}`, `{"a":1,"b":[true,false,null],"c":{"d":"e"}}`,
	`{}`, `[]`, `""`, `0`, `-1`, `123456789012345`, `1234567890123456`, `-0`, `01`, `1.5`, `1e3`, `1E3`,
	`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":1,"A":2}`, `{"A":1,"a":2}`, `{"":1,"a":2}`,
	`{"é":1}`, `{"a":"é€😀"}`, "\"\xff\"", "\"\xed\xa0\x80\"", `"\u0041"`, `"a\"b"`, "\"\x7f\"",
	`{"a": 1}`, ` 1`, `1 `, `[1,]`, `{"a":1,}`, `[1 2]`, `{"a"1}`, `tru`, `nul`, `falsey`,
	`[[[]]]`, strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
	strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth),
	strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1),
}

func TestIsCanonical(t *testing.T) {
	for _, in := range canonicalSeeds {
		checkIsCanonical(t, []byte(in))
	}
	for in, want := range map[string]bool{
		`{"payload":"0123456789abcdef"}`: true, `{"a":1,"b":[true,false,null],"c":{"d":"e"}}`: true,
		`{"a":"é€😀"}`: true, `123456789012345`: true, "\"\x7f\"": true,
		`{"b":1,"a":2}`: false, `{"a":1,"a":2}`: false, `-0`: false, `1.5`: false, `{"a": 1}`: false,
	} {
		if got := isCanonical([]byte(in)); got != want {
			t.Errorf("isCanonical(%s) = %v, want %v", in, got, want)
		}
	}
}

// FuzzIsCanonical checks that what isCanonical accepts, the parser
// accepts and writes back unchanged.
func FuzzIsCanonical(f *testing.F) {
	for _, in := range canonicalSeeds {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkIsCanonical(t, in) })
}

func checkIsCanonical(t *testing.T, in []byte) {
	t.Helper()
	if !isCanonical(in) {
		return
	}
	out, err := appendParsed(nil, in)
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("isCanonical(%q) = true, but the parser writes %q, %v", in, out, err)
	}
}
