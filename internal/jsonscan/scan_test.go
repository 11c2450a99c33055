package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// validSeeds are texts on either side of encoding/json's Valid.
var validSeeds = []string{
	``, ` `, `{}`, `[]`, `""`, `0`, `-0`, `1.5e+3`, `true`, `nul`, `null `, ` {"a" : [1, 2, {"b": null}]} `,
	`{"a":1,}`, `[1,]`, `{"a"}`, `{"a":}`, `01`, `-`, `1.`, `1e`, `.5`, `+1`, `"\u12"`, `"\ud800"`, `"\x"`,
	"\"\x01\"", "\"\xff\"", `"\/\b\f\n\r\t\"\\"`, `[1]x`, `{} {}`, "\ufeff{}", `{"a":1}}`, `[[[]]]`, `"`, `{`,
	`{"a":1 "b":2}`, `[1 2]`, "{\"a\":\"\xe2\x80\xa8\"}", `1E-7`, `tru`, `falsey`, "\t\n\r 1 \t",
}

func FuzzValidMatchesEncodingJSON(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", data, got, want)
		}
	})
}

func TestValidMatchesEncodingJSON(t *testing.T) {
	for _, s := range validSeeds {
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json says %v", s, got, want)
		}
	}
}

// TestValidDepth holds Valid to encoding/json's nesting limit.
func TestValidDepth(t *testing.T) {
	for _, n := range []int{MaxDepth, MaxDepth + 1} {
		for _, open := range []string{"[", `{"a":`} {
			inner, close := "", "]"
			if open != "[" {
				inner, close = "1", "}"
			}
			doc := []byte(strings.Repeat(open, n) + inner + strings.Repeat(close, n))
			if got, want := Valid(doc), json.Valid(doc); got != want || got != (n <= MaxDepth) {
				t.Errorf("Valid(%d × %s) = %v, encoding/json %v", n, open, got, want)
			}
		}
	}
}

func FuzzObjectMembers(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"a":1,"a":2," b\u0041":[1,{"c":"}"}],"d":"\"}"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, ok := ObjectMembers(nil, data)
		trimmed := bytes.TrimLeft(data, " \t\r\n")
		if want := json.Valid(data) && len(trimmed) > 0 && trimmed[0] == '{'; ok != want {
			t.Fatalf("ObjectMembers(%q) ok = %v, want %v", data, ok, want)
		}
		if !ok {
			if len(ms) != 0 {
				t.Fatalf("ObjectMembers(%q) failed with %d members", data, len(ms))
			}
			return
		}
		// The members, written back, are the object: same names and
		// values in the same order, by encoding/json's tokens.
		var re []byte
		re = append(re, '{')
		for i, m := range ms {
			if i > 0 {
				re = append(re, ',')
			}
			re = append(append(append(re, m.Name...), ':'), m.Value...)
		}
		re = append(re, '}')
		if !tokensEqual(t, data, re) {
			t.Fatalf("ObjectMembers(%q) = %q, not the same tokens", data, re)
		}
	})
}

// tokensEqual compares the encoding/json tokens of two valid texts.
func tokensEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	for {
		ta, ea := da.Token()
		tb, eb := db.Token()
		if ea != nil || eb != nil {
			return errors.Is(ea, eb) || (ea != nil && eb != nil && ea.Error() == eb.Error())
		}
		if ta != tb {
			return false
		}
	}
}

func TestScanStringFlags(t *testing.T) {
	for _, c := range []struct {
		in    string
		flags StringFlags
	}{
		{`"plain"`, 0},
		{`"a\nb"`, Escaped},
		{`"é"`, NonASCII},
		{"\"\xff\"", NonASCII | BadUTF8},
		{`"\ud800"`, Escaped},
	} {
		end, flags, err := ScanString([]byte(c.in), 0)
		if err != nil || end != len(c.in) || flags != c.flags {
			t.Errorf("ScanString(%q) = %d, %b, %v; want %d, %b", c.in, end, flags, err, len(c.in), c.flags)
		}
	}
}

func FuzzAppendUnquoted(f *testing.F) {
	for _, s := range []string{`""`, `"a\u00e9\ud83d\ude00\n"`, `"\ud800"`, `"\udc00"`, "\"\xff\"", `"\ud800\u0041"`, `"abc`, `"\q"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != '"' {
			return
		}
		text, end, err := AppendUnquoted(nil, data, 0)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Off < 0 || e.Off > len(data) {
				t.Fatalf("AppendUnquoted(%q): %v, not an Error within the text", data, err)
			}
			return
		}
		if !utf8.Valid(text) {
			t.Fatalf("AppendUnquoted(%q) = %q, not UTF-8", data, text)
		}
		var want string
		if err := json.Unmarshal(data[:end], &want); err != nil || want != string(text) {
			t.Fatalf("AppendUnquoted(%q) = %q; encoding/json: %q, %v", data, text, want, err)
		}
	})
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<a&b>", "\u2028\u2029", "\xff\xfe", "é\x00\x1f\"\\\b\f\n\r\t", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s, HTMLSafe); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q, HTMLSafe) = %s, encoding/json %s", s, got, want)
		}
		if got := AppendString(nil, []byte(s), HTMLSafe); !bytes.Equal(got, want) {
			t.Fatalf("AppendString([]byte(%q), HTMLSafe) = %s, encoding/json %s", s, got, want)
		}
		if !utf8.ValidString(s) {
			return
		}
		got := AppendString(nil, s, Canonical)
		var back string
		if err := json.Unmarshal(got, &back); err != nil || back != s {
			t.Fatalf("AppendString(%q, Canonical) = %s reads back as %q, %v", s, got, back, err)
		}
		// Only '"', '\' and control characters are escaped.
		for i := 0; i < len(got); i++ {
			if got[i] == '\\' {
				i++
				if c := got[i]; c == 'u' && !bytes.HasPrefix(got[i:], []byte("u00")) || strings.IndexByte(`"\bfnrtu`, c) < 0 {
					t.Fatalf("AppendString(%q, Canonical) = %s escapes more than RFC 8785 does", s, got)
				}
			}
		}
	})
}
