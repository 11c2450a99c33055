package jcs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/carmyhq/carmy/store/jcs"
)

var sentinels = []error{
	jcs.ErrSyntax, jcs.ErrDuplicateKey, jcs.ErrNumber, jcs.ErrInvalidUTF8, jcs.ErrTooDeep,
}

func TestErrors(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		// Syntax.
		{``, jcs.ErrSyntax},
		{`   `, jcs.ErrSyntax},
		{`nul`, jcs.ErrSyntax},
		{`True`, jcs.ErrSyntax},
		{`truex`, jcs.ErrSyntax},
		{`NaN`, jcs.ErrSyntax},
		{`Infinity`, jcs.ErrSyntax},
		{`-Infinity`, jcs.ErrSyntax},
		{`01`, jcs.ErrSyntax},
		{`-01`, jcs.ErrSyntax},
		{`00`, jcs.ErrSyntax},
		{`+1`, jcs.ErrSyntax},
		{`.5`, jcs.ErrSyntax},
		{`1.`, jcs.ErrSyntax},
		{`1.e5`, jcs.ErrSyntax},
		{`1e`, jcs.ErrSyntax},
		{`1e+`, jcs.ErrSyntax},
		{`-`, jcs.ErrSyntax},
		{`- 1`, jcs.ErrSyntax},
		{`0x10`, jcs.ErrSyntax},
		{`1_000`, jcs.ErrSyntax},
		{`1 2`, jcs.ErrSyntax},
		{`{} {}`, jcs.ErrSyntax},
		{`[1,]`, jcs.ErrSyntax},
		{`[,1]`, jcs.ErrSyntax},
		{`[1 2]`, jcs.ErrSyntax},
		{`[`, jcs.ErrSyntax},
		{`[1`, jcs.ErrSyntax},
		{`]`, jcs.ErrSyntax},
		{`{"a":1,}`, jcs.ErrSyntax},
		{`{"a" 1}`, jcs.ErrSyntax},
		{`{"a":}`, jcs.ErrSyntax},
		{`{a:1}`, jcs.ErrSyntax},
		{`{1:1}`, jcs.ErrSyntax},
		{`{"a":1`, jcs.ErrSyntax},
		{`{"a"`, jcs.ErrSyntax},
		{`{`, jcs.ErrSyntax},
		{`'a'`, jcs.ErrSyntax},
		{`{'a':1}`, jcs.ErrSyntax},
		{`"abc`, jcs.ErrSyntax},
		{`"abc\`, jcs.ErrSyntax},
		{`"\x41"`, jcs.ErrSyntax},
		{`"\a"`, jcs.ErrSyntax},
		{`"\'"`, jcs.ErrSyntax},
		{`"\u12"`, jcs.ErrSyntax},
		{`"\u12G4"`, jcs.ErrSyntax},
		{`"\U0041"`, jcs.ErrSyntax},
		{"\"a\x00b\"", jcs.ErrSyntax},
		{"\"a\nb\"", jcs.ErrSyntax},
		{"\"a\tb\"", jcs.ErrSyntax},
		{"\"\x1f\"", jcs.ErrSyntax},
		{`// c` + "\n1", jcs.ErrSyntax},
		{`/* c */ 1`, jcs.ErrSyntax},
		{`1 // c`, jcs.ErrSyntax},
		{"\ufeff1", jcs.ErrSyntax}, // byte order mark
		{"\u00a01", jcs.ErrSyntax}, // non-JSON whitespace
		{"1\f", jcs.ErrSyntax},     // form feed is not JSON whitespace
		{"\xff", jcs.ErrSyntax},    // invalid UTF-8 outside strings
		{`"\ud800\u12"`, jcs.ErrSyntax},

		// Duplicate member names, including ones spelled differently.
		{`{"a":1,"a":2}`, jcs.ErrDuplicateKey},
		{`{"a":1,"b":2,"a":1}`, jcs.ErrDuplicateKey},
		{`{"a":1,"\u0061":2}`, jcs.ErrDuplicateKey},
		{`{"/":1,"\/":2}`, jcs.ErrDuplicateKey},
		{`{"😀":1,"\ud83d\ude00":2}`, jcs.ErrDuplicateKey},
		{`[{"x":{"k":1,"k":1}}]`, jcs.ErrDuplicateKey},

		// Numbers outside the double range.
		{`1e400`, jcs.ErrNumber},
		{`-1e400`, jcs.ErrNumber},
		{`1.7976931348623159e308`, jcs.ErrNumber},
		{`[1, 2e999999999999]`, jcs.ErrNumber},
		{`{"a":` + strings.Repeat("9", 400) + `}`, jcs.ErrNumber},

		// Invalid UTF-8 and lone surrogates.
		{"\"\xff\"", jcs.ErrInvalidUTF8},
		{"\"a\xc3\"", jcs.ErrInvalidUTF8},            // truncated sequence
		{"\"\xc0\xaf\"", jcs.ErrInvalidUTF8},         // overlong encoding
		{"\"\xed\xa0\x80\"", jcs.ErrInvalidUTF8},     // UTF-8 encoded surrogate
		{"\"\xf4\x90\x80\x80\"", jcs.ErrInvalidUTF8}, // beyond U+10FFFF
		{"{\"\xff\":1}", jcs.ErrInvalidUTF8},
		{`"\ud800"`, jcs.ErrInvalidUTF8},
		{`"\udc00"`, jcs.ErrInvalidUTF8},
		{`"\ude00\ud83d"`, jcs.ErrInvalidUTF8},
		{`"\ud83dx"`, jcs.ErrInvalidUTF8},
		{`"\ud83d\n"`, jcs.ErrInvalidUTF8},
		{`"\ud83d\u0041"`, jcs.ErrInvalidUTF8},
		{`"\ud83d\ud83d"`, jcs.ErrInvalidUTF8},
		{`{"\ud800":1}`, jcs.ErrInvalidUTF8},

		// Nesting.
		{strings.Repeat("[", jcs.MaxDepth+1) + strings.Repeat("]", jcs.MaxDepth+1), jcs.ErrTooDeep},
		{strings.Repeat(`{"a":`, jcs.MaxDepth+1) + "1" + strings.Repeat("}", jcs.MaxDepth+1), jcs.ErrTooDeep},
		{strings.Repeat("[", 1_000_000), jcs.ErrTooDeep},
		{strings.Repeat(`[{"a":`, 500_000), jcs.ErrTooDeep},
	}
	for _, tc := range tests {
		name := tc.in
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		out, err := jcs.AppendCanonical(nil, []byte(tc.in))
		if err == nil {
			t.Errorf("Canonicalize(%q) = %s, want error %v", name, out, tc.want)
			continue
		}
		if out != nil {
			t.Errorf("Canonicalize(%q) returned output %q with error", name, out)
		}
		for _, s := range sentinels {
			if got, want := errors.Is(err, s), s == tc.want; got != want {
				t.Errorf("Canonicalize(%q): errors.Is(%v, %v) = %v, want %v", name, err, s, got, want)
			}
		}
		if !strings.HasPrefix(err.Error(), "jcs: ") || !strings.Contains(err.Error(), "offset") {
			t.Errorf("Canonicalize(%q): error %q lacks prefix or offset", name, err)
		}
	}
}

func TestErrorOffset(t *testing.T) {
	tests := []struct {
		in, offset string
	}{
		{`[1, 2, 01]`, "offset 7"},
		{`{"a":1,"b":2,"a":3}`, "offset 13"},
		{`["ok", "\ud800"]`, "offset 8"},
		{"[\"\xff\"]", "offset 2"},
		{`[1] x`, "offset 4"},
		{`[1e400]`, "offset 1"},
	}
	for _, tc := range tests {
		_, err := jcs.AppendCanonical(nil, []byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.offset+":") {
			t.Errorf("Canonicalize(%q) error = %v, want it to mention %q", tc.in, err, tc.offset)
		}
	}
}
